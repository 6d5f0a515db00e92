#!/usr/bin/env bash
# Call 71 (2026-11-28) on nvidia-h200-x2 (the four-GPU kind was no longer lent) (call 72 runs the benchmarks of the same bundle): waits across backends (captured waits, pooled wait words,
# the interplay and hostile tests) and memory pools (wgpu pool, pool_model) with cpu, cuda:0/1,
# hip:0/1 (shim) and wgpu:0 (NVIDIA's Vulkan) as places; compute-sanitizer memcheck over both on
# cpu,cuda:0; the refusal path of captured waits (HIP without hipLaunchHostFunc); the wgpu pool's
# crate tests; examples/hetero and bench-cross; bench-pools beside peers_cuda.py pools.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle (commit in
# COMMIT; binaries this call does not use removed to fit the carry limit); carry [gpurun, .gl].
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
ALL=cpu,cuda:0,cuda:1,hip:0,hip:1,wgpu:0
watched conformance-all-places 330 env DEVSTREAM_TEST_STACKS_AFTER=320 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=$ALL ./conformance
run memcheck-cross-pools 300 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross pool
run capture-refusal-hip 60 env DEVSTREAM_HIP_DISABLE=hipLaunchHostFunc DEVSTREAM_REQUIRE=cpu,hip DEVSTREAM_PLACES=cpu,hip:0 ./conformance cross::a_capture_that_cannot --nocapture
run cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
tar czf $OUT/results.tgz -C $R .
