#!/usr/bin/env bash
# Call 92 on nvidia-h200: the pipelines again after the snapshots of a host buffer's queued
# copies became sweeper-watched completions with no doorbell (call 91: with doorbells, the
# pipelines' snapshots, awaited out of their stream's order, queued behind one another on the
# hub's notifier streams and resolved only at the sweeper's 100 ms check: the hetero example was
# killed at 60 s). The host_fn_buffers and cross sections on every place; the hetero example;
# bench-cross with 200 hand-off samples.
# Build: as run-90.sh; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
run example-hetero 60 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
run bench-cross 150 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --samples 200
watched host-fn-buffers-cross 150 env DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance host_fn_buffers cross
tar czf $OUT/results.tgz -C $R .
