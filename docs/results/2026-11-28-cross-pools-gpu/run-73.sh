#!/usr/bin/env bash
# Call 73 (2026-11-28) on nvidia-h200 (one GPU): the fixes for call 72's failures on the GPU (the capture-info copy that
# read freed driver memory, the reclaim stream's frees at drain points, wgpu completions after a
# loss, the flag that kept a capturing stream alive, refusals inside CUDA/HIP host functions
# before any runtime call): the sections that failed, one test at a time with output inline, on
# cpu, cuda:0, hip:0, wgpu:0; the graph-memory race test 40 times on its own; the wgpu crate's
# device-loss tests on NVIDIA's Vulkan; then the whole suite in parallel on the same places.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle (commit in
# COMMIT; unused binaries removed); carry [gpurun, .gl].
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
cd gpurun
. bundle/gpu-run-lib.sh
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
P=cpu,cuda:0,hip:0,wgpu:0
watched serial-sections 190 env DEVSTREAM_TEST_STACKS_AFTER=180 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=$P ./conformance cross pool flags --test-threads=1 --nocapture
{ ok=0; bad=0; for i in $(seq 40); do if env DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 timeout 10 ./conformance pools_capture::graph_memory_survives_racing_drops_and_launches --exact > $R/race-last.txt 2>&1; then ok=$((ok+1)); else bad=$((bad+1)); cp $R/race-last.txt $R/race-fail-$i.txt; fi; done; echo "graph-memory race test: $ok ok, $bad failed of 40"; } > $R/race-40.txt 2>&1; cat $R/race-40.txt
run wgpu-loss-tests 40 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests loss lost --test-threads=1
watched conformance-parallel 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=$P ./conformance
tar czf $OUT/results.tgz -C $R .
