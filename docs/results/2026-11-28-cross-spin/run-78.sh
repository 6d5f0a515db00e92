#!/usr/bin/env bash
# Call 78 (2026-11-28, third session) on nvidia-h200: the completion hub's spin window (the
# sweeper asks pending events back to back for 500 us after each registration) and the shared
# host-function thread rule for the HIP-on-CUDA shim. bench-cross (hand-off latency and
# pipelines on cpu, cuda:0, hip:0, wgpu:0), bench-wake on cuda:0 and hip:0, the hetero
# example, the cross_hostile section serially and the whole suite in parallel.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle; carry [gpurun, .gl].
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
run bench-cross 200 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
run bench-wake-cuda 60 ./bench-wake --place cuda:0
run bench-wake-hip 60 ./bench-wake --place hip:0
run example-hetero 60 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
watched cross-hostile-serial 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance cross_hostile --test-threads=1 --nocapture
watched conformance-parallel 240 env DEVSTREAM_TEST_STACKS_AFTER=230 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
tar czf $OUT/results.tgz -C $R .
