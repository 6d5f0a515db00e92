#!/usr/bin/env bash
# Not run yet: the GPU half of this folder, for one H200 (or two), with CUDA, HIP through the
# HIP-on-CUDA shim and wgpu on NVIDIA's Vulkan driver in one process.
# Build: cargo xtask gpu-bundle --features cuda,hip,wgpu --out bundle;
# git rev-parse --short HEAD > bundle/COMMIT; cp docs/results/gpu-run-lib.sh docs/results/2026-11-28-cross/run-gpu.sh bundle/
# run with carry [bundle, .gl] (the Vulkan loader packages, as run-57.sh of 2026-11-27-gpu).
# What it should show: conformance cross:: all ok on every ordered pair (the pooled wait words on
# cuda/hip, including cross::reused_wait_words_hold_later_waits_until_their_own_release);
# example-hetero prints "waits ... host fences ... ratio" for cpu → cuda:0 → cpu,
# cpu → hip:0 → cpu, cpu → wgpu:0 → cpu and the chain cpu → cuda:0 → hip:0 → wgpu:0 → cpu, every
# chunk checked; bench-cross: hand-off p50 wait/fence ≤ 1.0 for the pairs with cuda:0, and
# pipeline rows cpu → cuda:0 → cpu and cpu → cuda:0 → wgpu:0 → cpu at waits/fences ≥ 1.5 in
# chunks/s (row ratio ≤ 0.67 in ns per chunk).
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
. "$(dirname "$0")/gpu-run-lib.sh"
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched conformance-cross 300 env DEVSTREAM_TEST_STACKS_AFTER=280 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance cross::
run example-hetero 120 ./example-hetero 2000 64
run bench-cross 500 env DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
tar czf $OUT/results.tgz -C $R .
