#!/usr/bin/env bash
# Call 95 on nvidia-h200: what issues 27 and 28 owe since call 94 (the ordered sweep 6bf82ef,
# the deferred-release collect a39aae0, captured waits and hostile checks since): the whole
# suite on cpu, cuda:0, hip:0 (shim), wgpu:0 (NVIDIA's Vulkan) in parallel; pool_model and the
# model tests alone three times (pool_model failed on hip:0 in calls 89 and 94); the
# pipelines with 4 and 16 chunks in flight; bench-cross whole (hand-off latencies per pair
# beside host fences); the hetero example; memcheck over cross, host_fn_buffers and pools on
# cpu and cuda:0.
# Build: cargo xtask gpu-bundle --features cuda,wgpu,hip --out gpurun/bundle, plus
# docs/results/gpu-run-lib.sh and COMMIT in the bundle; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched conformance-parallel 150 env DEVSTREAM_TEST_STACKS_AFTER=140 $P ./conformance
for i in 1 2 3; do watched models-$i 100 env DEVSTREAM_TEST_STACKS_AFTER=90 $P ./conformance model; done
run pipelines-4 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 4
run pipelines-16 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 16
run example-hetero 60 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
run bench-cross 150 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
run memcheck-cross-pools 120 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross host_fn_buffers pool --test-threads=4
tar czf $OUT/results.tgz -C $R .
