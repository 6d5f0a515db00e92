#!/usr/bin/env bash
# Two H200s, call 1: the two-GPU hang fixed? Conformance in parallel on cpu + cuda:0/1 + hip:0/1
# (HIP-on-CUDA shim), repeated; the CUDA crate's GPU tests; and the pre-fix binary on cuda:0
# alone with the default thread count (is the hang about the second device, or concurrency?).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RUST_BACKTRACE=1
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# devices: $(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tr '\n' ';') $(nproc) CPUs"; echo "# devstream commit: $1"; shift; echo "# command: $*"; echo; }
run() { local name=$1 t=$2 c=$3; shift 3; local s=$(date +%s); { hdr "$c" "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) | $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
NEW="$(cat COMMIT)"; OLD="$(cat COMMIT-before)"
run conformance-x2-all-places 150 "$NEW" env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance --nocapture
for i in 1 2 3; do run conformance-x2-cuda-repeat-$i 90 "$NEW" env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0,cuda:1 ./conformance; done
run cuda-gpu-tests-x2 120 "$NEW" env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run before-fix-cuda0-only-32-threads 60 "$OLD" env DEVSTREAM_PLACES=cuda:0 ./conformance-before
run before-fix-cuda0-only-16-threads 60 "$OLD" env DEVSTREAM_PLACES=cuda:0 ./conformance-before --test-threads=16
