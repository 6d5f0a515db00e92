#!/usr/bin/env bash
# One H100: the same last-commit binaries as on the H200: conformance on every backend in one
# process, the CUDA GPU tests, bench-cuda, bench-wgpu and the pipeline.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig 2>/dev/null
j=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $j ] && export VK_DRIVER_FILES=$j __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
cd $B
export RUST_BACKTRACE=1 DEVSTREAM_WGPU_BACKENDS=vulkan DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
run conformance 180 env DEVSTREAM_REQUIRE=cpu,cuda,wgpu,hip ./conformance
run cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run bench-cuda 150 env DEVSTREAM_BENCH_JSON=$R/rows-cuda.jsonl ./bench-cuda
run bench-wgpu 150 env DEVSTREAM_BENCH_JSON=$R/rows-wgpu.jsonl ./bench-wgpu
run pipeline 60 ./example-pipeline 2048 16
grep -h "MISS\|  ok$" $R/bench-*.txt | head -20; grep -h "duplex" $R/pipeline.txt
