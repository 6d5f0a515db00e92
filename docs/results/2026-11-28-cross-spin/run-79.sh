#!/usr/bin/env bash
# Call 79 (2026-11-28, third session) on nvidia-h200: bench-cross with both hand-off rounds
# (next work a stamping host function; next work a flag write seen by a spinning host thread);
# the pool sections with the property test's captures and replays (merged from pmodel) on
# cuda:0 and hip:0 serially; compute-sanitizer memcheck over the cross sections on cpu and cuda:0
# (memory errors only); the whole suite in parallel.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle; carry [gpurun, .gl].
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched pools-serial 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance pool --test-threads=1 --nocapture
run bench-cross 240 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
watched conformance-parallel 240 env DEVSTREAM_TEST_STACKS_AFTER=230 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
run memcheck-cross 280 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross:: --test-threads=1
tar czf $OUT/results.tgz -C $R .
