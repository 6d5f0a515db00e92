#!/usr/bin/env bash
# Call 72 (2026-11-28) on nvidia-h200-x2: after call 71's failures and its segfault (which hid
# libtest's failure report), the cross-backend and pool sections again one test at a time with
# their output inline (the last test started shows where a crash is), on cpu, cuda:0, hip:0 and
# wgpu:0; then the benchmarks: the wgpu pool's crate tests, examples/hetero, bench-cross,
# bench-pools on cuda:0 and wgpu:0 beside peers_cuda.py pools.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle (commit in
# COMMIT; binaries this call does not use removed); carry [gpurun, .gl].
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched cross-pools-serial 290 env DEVSTREAM_TEST_STACKS_AFTER=280 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance cross pool --test-threads=1 --nocapture
run wgpu-pool-tests 60 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests tests_pool --test-threads=1
run example-hetero 60 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
run bench-cross 150 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
run bench-pools-cuda 90 ./bench-pools --place cuda:0
run bench-pools-wgpu 90 ./bench-pools --place wgpu:0
run peers-pools 90 env PYTHONUNBUFFERED=1 python3 $B/peers_cuda.py pools
tar czf $OUT/results.tgz -C $R .
