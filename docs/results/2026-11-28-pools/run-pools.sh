#!/usr/bin/env bash
# Memory pools, phase 2b (wgpu pool, trace counter track, pool model test, bench-pools) on one H200:
# written for the GPU session, not run yet. The pool tests on cuda:0, hip:0 (shim) and wgpu:0
# (NVIDIA's Vulkan driver), compute-sanitizer memcheck over them on cuda:0, the wgpu crate's pool
# tests, then bench-pools on cuda:0 and wgpu:0 beside the peers script's pools section in the same
# session (PyTorch's caching allocator and CuPy's MemoryPool; the churn with record_stream).
# Build: cargo xtask gpu-bundle --features cuda,hip,wgpu --out bundle;
# git rev-parse --short HEAD > bundle/COMMIT;
# cp docs/results/gpu-run-lib.sh docs/results/2026-11-28-pools/run-pools.sh bundle/
# run with carry [bundle, .gl]
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
. "$(dirname "$0")/gpu-run-lib.sh"
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched pools-conformance 300 env DEVSTREAM_TEST_STACKS_AFTER=280 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance pool --nocapture
run memcheck-pools 300 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance pool
run wgpu-pool-tests 90 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests tests_pool --test-threads=1
run bench-pools-cuda 200 ./bench-pools --place cuda:0
run bench-pools-wgpu 200 ./bench-pools --place wgpu:0
run peers-pools 200 python3 peers_cuda.py pools
run churn-plan 10 ./bench-pools --plan 5
tar czf $OUT/results.tgz -C $R .
