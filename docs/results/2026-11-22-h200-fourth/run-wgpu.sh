#!/usr/bin/env bash
# One H200 with NVIDIA's Vulkan ICD: capability table, conformance on every place in one process,
# wgpu crate tests, bench-wgpu (query by plain Poll), example-wgpu.
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
run info 60 ./example-info
run example-wgpu 60 ./example-wgpu
run conformance 180 env DEVSTREAM_REQUIRE=cpu,cuda,wgpu,hip ./conformance
run wgpu-crate-tests 120 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests
run bench-wgpu-1 150 env DEVSTREAM_BENCH_JSON=$R/rows-wgpu-1.jsonl ./bench-wgpu
run bench-wgpu-2 150 env DEVSTREAM_BENCH_JSON=$R/rows-wgpu-2.jsonl ./bench-wgpu
grep -h "wgpu  " $R/bench-wgpu-*.txt
