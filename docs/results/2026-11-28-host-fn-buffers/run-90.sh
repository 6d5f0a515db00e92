#!/usr/bin/env bash
# Call 90 on nvidia-h200: host functions given host buffers (launch_host_func_with) on every
# (runner, owner) pair of cpu, cuda:0, hip:0 (wgpu:0 and plug-in places: capability off at this
# commit); the whole suite in parallel; the hetero example; bench-cross (hand-offs and the
# pipelines, whose stages now fill and read the device stages' pinned buffers from CPU host
# functions given them).
# Build: conformance, bench-cross, example hetero (release, cuda,hip,wgpu), stripped into
# gpurun/bundle with the HIP shim and gpu-run-lib.sh; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
watched host-fn-buffers 90 env DEVSTREAM_TEST_STACKS_AFTER=80 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance host_fn_buffers --test-threads=1 --nocapture
watched conformance-parallel 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
run example-hetero 60 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
run bench-cross 240 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
tar czf $OUT/results.tgz -C $R .
