#!/usr/bin/env bash
# One H200, final state of the session: capability table, conformance on cpu + cuda:0 + wgpu:0
# (NVIDIA Vulkan) + hip:0 (HIP-on-CUDA shim) in one process, the wgpu and CUDA crates' GPU tests,
# bench-wgpu (query by plain Poll), bench-cuda and the peers in the same session.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_WGPU_BACKENDS=vulkan DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run info 60 ./example-info
run example-cuda 60 ./example-cuda
run example-wgpu 60 ./example-wgpu
run conformance 180 env DEVSTREAM_REQUIRE=cpu,cuda,wgpu,hip ./conformance
run wgpu-crate-tests 120 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests
run cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run bench-wgpu 150 env DEVSTREAM_BENCH_JSON=$R/rows-wgpu.jsonl ./bench-wgpu
run bench-cuda 150 env DEVSTREAM_BENCH_JSON=$R/rows-cuda.jsonl ./bench-cuda
run peers 120 env PYTHONUNBUFFERED=1 python3 peers_cuda.py
grep -h "MISS\|record+query\|host func" $R/bench-*.txt
