#!/usr/bin/env bash
# One H200, the session's last commit: conformance on cpu + cuda:0 + wgpu:0 (NVIDIA Vulkan) + hip:0
# (shim) in one process; CUDA GPU tests; memcheck on the conformance suite (access errors; the
# leak listing separately); bench-cuda and the peers; bench-wgpu; the pipeline example.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R
# The image has NVIDIA's Vulkan driver but no Vulkan loader: install Debian's (carried as .gl/).
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
j=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $j ] && export VK_DRIVER_FILES=$j __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
cd $B
export RUST_BACKTRACE=1 DEVSTREAM_WGPU_BACKENDS=vulkan DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
run conformance 180 env DEVSTREAM_REQUIRE=cpu,cuda,wgpu,hip ./conformance
run cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run sanitizer-memcheck-conformance 150 env DEVSTREAM_PLACES=cuda:0 $S --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance --skip stress --skip model --test-threads=1
run sanitizer-memcheck-leaks-conformance 150 env DEVSTREAM_PLACES=cuda:0 $S --tool memcheck --report-api-errors no --leak-check full ./conformance --skip stress --skip model --test-threads=1
run bench-cuda 150 env DEVSTREAM_BENCH_JSON=$R/rows-cuda.jsonl ./bench-cuda
run peers 120 env PYTHONUNBUFFERED=1 python3 peers_cuda.py
run bench-wgpu 150 env DEVSTREAM_BENCH_JSON=$R/rows-wgpu.jsonl ./bench-wgpu
run pipeline 60 ./example-pipeline
grep -h "MISS\|host func\|record+query\|stream from the pool\|SUMMARY" $R/*.txt
