#!/usr/bin/env bash
# Call 77 (2026-11-28, third session) on nvidia-h200: call 76's fixes plus the block cache's
# fixes (a stream's cached blocks freed when its last handle goes; drain points wait for the
# frees on idle streams). The race test 20 times per place; the pool sections serially on
# cuda:0 and hip:0; the whole suite in parallel on cpu, cuda:0, hip:0, wgpu:0 (NVIDIA's
# Vulkan); the CUDA GPU and soundness tests; memcheck over the pool sections (memory errors
# only: the tests provoke API errors on purpose); bench-pools on cuda:0 beside peers_cuda.py
# pools. Also the cross_hostile section serially (the pending-wait drain check and the
# doorbell-less delivery of event completions merged from the xleak branch).
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
  for i in $(seq 20); do
    if env DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=$P timeout 20 ./conformance $T --exact > $R/last.txt 2>&1; then ok=$((ok+1)); else bad=$((bad+1)); cp $R/last.txt $R/fail-${P%:0}-$i.txt; fi
  done
  echo "$P: $ok ok, $bad failed of 20"
done 2>&1 | tee $R/race-rate.txt
watched pools-serial 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance pool --test-threads=1 --nocapture
watched conformance-parallel 240 env DEVSTREAM_TEST_STACKS_AFTER=230 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
watched cross-hostile-serial 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance cross_hostile --test-threads=1 --nocapture
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run memcheck-pools 200 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance pool --test-threads=1
run bench-pools-cuda 60 ./bench-pools --place cuda:0
run peers-pools 90 env PYTHONUNBUFFERED=1 python3 $B/peers_cuda.py pools
tar czf $OUT/results.tgz -C $R .
