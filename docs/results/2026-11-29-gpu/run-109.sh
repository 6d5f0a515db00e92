#!/usr/bin/env bash
# Call 109 on nvidia-h200 (commit b73c319: the host-function thread's back-off restarts for each
# function queued): the whole suite in parallel, the hand-offs.
# Build: as run-104.sh (conformance-sym built with symbols, bench-cross from the bundle).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched conformance-parallel 150 env DEVSTREAM_TEST_STACKS_AFTER=140 $P ./conformance-sym
run bench-cross 60 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --handoffs-only
tar czf $OUT/results.tgz -C $R .
