#!/usr/bin/env bash
# devstream combined GPU run: conformance on cpu + cuda:0 + wgpu:0 (NVIDIA Vulkan) + hip:0 (HIP-on-CUDA
# shim) in one process, crate tests, examples, benchmarks beside raw calls and the peers, sanitizers.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
j=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $j ] && export VK_DRIVER_FILES=$j __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export DEVSTREAM_WGPU_BACKENDS=vulkan DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so RUST_BACKTRACE=1
cd $B
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; { hdr "$@"; timeout $t "$@" 2>&1; echo "exit status: $?"; } > $R/$name.txt; echo "$name: $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run info 30 ./example-info
run conformance 180 env DEVSTREAM_REQUIRE=cpu,cuda,wgpu,hip ./conformance
grep -E "^test result|FAILED|panicked" $R/conformance.txt | head -20
run cuda-crate-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-tests --test-threads=1
run wgpu-crate-tests 90 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests
run hip-crate-tests 60 ./devstream-hip-tests
run example-cuda 30 ./example-cuda
run example-hip 30 ./example-hip
run example-wgpu 30 ./example-wgpu
run example-pipeline 60 ./example-pipeline
run timeline-cuda 60 ./example-timeline cuda:0 $R/timeline-cuda
run bench-cuda 120 env DEVSTREAM_BENCH_JSON=$R/rows-cuda.jsonl ./bench-cuda
run bench-wgpu 90 env DEVSTREAM_BENCH_JSON=$R/rows-wgpu.jsonl ./bench-wgpu
run peers 120 env PYTHONUNBUFFERED=1 python3 peers_cuda.py
S=/usr/local/cuda/bin/compute-sanitizer
run sanitizer-memcheck 100 env DEVSTREAM_PLACES=cuda:0 PROPTEST_CASES=8 $S --tool memcheck --error-exitcode 9 ./conformance --skip stress --skip model --test-threads=1
run sanitizer-racecheck 80 env DEVSTREAM_REQUIRE=cuda $S --tool racecheck --error-exitcode 9 ./devstream-cuda-tests --test-threads=1
