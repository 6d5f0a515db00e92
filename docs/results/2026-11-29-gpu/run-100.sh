#!/usr/bin/env bash
# Call 100 on nvidia-h200 (commit 4e2a488: the pipeline's producer and consumer in one
# vectorized pass each): the pipelines at 64 KiB with 4 and 16 in flight, bench-cross whole
# (hand-offs and pipelines, for docs/results), the hetero example.
# Build: as run-96.sh, pruned to conformance, bench-cross, example-hetero and the HIP shim.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
run pipelines-4 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 4
run pipelines-16 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 16
run example-hetero 60 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
run bench-cross 150 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0
tar czf $OUT/results.tgz -C $R .
