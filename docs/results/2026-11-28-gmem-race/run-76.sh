#!/usr/bin/env bash
# Call 76 (2026-11-28, third session) on nvidia-h200: the fix for call 75's crash (the capture
# registry's lock held across the native end of a capture; records into a capture from a
# dropping thread made under it) with `capture_alloc` on for CUDA/HIP, and the pools' per-stream
# block cache. The race test 30 times per place; the pool sections serially on cuda:0 and hip:0;
# memcheck over the graph-memory checks; the whole suite in parallel on cpu, cuda:0, hip:0,
# wgpu:0 (NVIDIA's Vulkan); the CUDA GPU tests; bench-pools on cuda:0 and hip:0 beside
# peers_cuda.py pools, alternating.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle; carry [gpurun, .gl].
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
T=pools_capture::graph_memory_survives_racing_drops_and_launches
for P in cuda:0 hip:0; do
  ok=0; bad=0
  for i in $(seq 30); do
    if env DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=$P timeout 20 ./conformance $T --exact > $R/last.txt 2>&1; then ok=$((ok+1)); else bad=$((bad+1)); cp $R/last.txt $R/fail-${P%:0}-$i.txt; fi
  done
  echo "$P: $ok ok, $bad failed of 30"
done 2>&1 | tee $R/race-rate.txt
watched pools-serial 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance pool --test-threads=1 --nocapture
watched conformance-parallel 240 env DEVSTREAM_TEST_STACKS_AFTER=230 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
for i in 1 2; do
  run bench-pools-cuda-$i 60 ./bench-pools --place cuda:0
  run peers-pools-$i 90 env PYTHONUNBUFFERED=1 python3 $B/peers_cuda.py pools
done
run bench-pools-hip 60 ./bench-pools --place hip:0
run memcheck-pools-capture 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 compute-sanitizer --tool memcheck --error-exitcode 9 ./conformance pools_capture pools:: --test-threads=1
tar czf $OUT/results.tgz -C $R .
