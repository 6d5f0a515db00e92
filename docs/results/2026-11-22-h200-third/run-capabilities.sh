#!/usr/bin/env bash
# One H200: conformance on cpu + cuda:0 + hip:0 (shim); hip:0 again with hipLaunchHostFunc treated
# as absent (what ROCm 5.2 looks like: capture_host_funcs off); the CUDA and HIP crates' GPU tests.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run conformance 120 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance --nocapture
run conformance-hip-rocm52-emulation 120 env DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 DEVSTREAM_HIP_DISABLE=hipLaunchHostFunc ./conformance --nocapture
grep -h "capture_host_funcs\|n/a" $R/conformance-hip-rocm52-emulation.txt | head -12
run cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run hip-crate-tests 60 ./devstream-hip-tests
run example-hip 30 ./example-hip
