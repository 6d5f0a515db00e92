#!/usr/bin/env bash
# Call 94 on nvidia-h200: the merged state (wgpu and plug-in places give their host buffers to
# host functions too): host_fn_buffers on every place, wgpu:0 on NVIDIA's Vulkan driver
# included; the whole suite in parallel; the pipelines alone with 4 and with 16 chunks in flight
# (is the single-device pipeline bound by the latency of one chunk's trip?); memcheck over
# host_fn_buffers on cpu and cuda:0.
# Build: as run-90.sh; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
watched host-fn-buffers 60 env DEVSTREAM_TEST_STACKS_AFTER=55 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance host_fn_buffers --test-threads=1
run pipelines-4 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 4
run pipelines-16 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 16
watched conformance-parallel 90 env DEVSTREAM_TEST_STACKS_AFTER=85 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
run memcheck-host-fn-buffers 50 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance host_fn_buffers --test-threads=1
tar czf $OUT/results.tgz -C $R .
