#!/usr/bin/env bash
# Call 74 (2026-11-28) on nvidia-h200 (one GPU): with capture_alloc off on CUDA/HIP (its race test
# still crashed in call 73), the whole suite in parallel on cpu, cuda:0, hip:0, wgpu:0 (NVIDIA's
# Vulkan), elision on; the CUDA GPU and soundness tests; the wgpu crate's pool and device-loss tests.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle (commit in
# COMMIT; unused binaries removed); carry [gpurun, .gl].
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched conformance-parallel 300 env DEVSTREAM_TEST_STACKS_AFTER=290 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run wgpu-pool-loss-tests 40 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests tests_pool loss lost --test-threads=1
tar czf $OUT/results.tgz -C $R .
