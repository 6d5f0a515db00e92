#!/usr/bin/env bash
# Call 91 on nvidia-h200: as call 90 after the CUDA/HIP snapshot of a host buffer's queued
# copies became exact (the completion of the per-stream use event's current record, not of all
# the using stream's work: call 90's pipelines were serialised by it, 0.59x); cross_hostile's
# check of a host function's access between CUDA and HIP accepts the consumer's own refusal;
# memcheck over host_fn_buffers on cpu and cuda:0.
# Build: as run-90.sh; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
watched host-fn-buffers 90 env DEVSTREAM_TEST_STACKS_AFTER=80 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance host_fn_buffers --test-threads=1
run example-hetero 60 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
run bench-cross 200 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
watched conformance-parallel 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
run memcheck-host-fn-buffers 120 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance host_fn_buffers --test-threads=1
tar czf $OUT/results.tgz -C $R .
