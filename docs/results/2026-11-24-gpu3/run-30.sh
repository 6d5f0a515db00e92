#!/usr/bin/env bash
# Call 30: wgpu on the H100 through its own Vulkan driver. The image has NVIDIA's ICD
# (/usr/share/vulkan/icd.d/nvidia_icd.json, libGLX_nvidia) but no Vulkan loader; the bundle
# carries Debian 12's libvulkan.so.1 (1.3.239) in bundle/lib. Then how fast N threads copy
# 64 MiB each at once on this host (the CPU all-reduce's bandwidth ceiling, issue 14).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export LD_LIBRARY_PATH=$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
run wgpu-info 60 ./example-wgpu
run wgpu-crate-tests 120 env DEVSTREAM_REQUIRE=wgpu ./devstream-wgpu-tests --test-threads=1
run conformance-wgpu 240 env DEVSTREAM_TEST_STACKS_AFTER=220 DEVSTREAM_REQUIRE=wgpu DEVSTREAM_PLACES=wgpu:0 ./conformance
for n in 1 2 4 8; do run pmemcpy-$n 60 ./pmemcpy $n; run pmemcpy-chunked-$n 60 ./pmemcpy $n 65536; done
grep -h "threads" $R/pmemcpy-*.txt
run bench-wgpu 200 ./bench-wgpu
run bench-scale-wgpu 240 ./bench-scale --place wgpu:0
run bench-wake-wgpu 120 ./bench-wake --place wgpu:0
