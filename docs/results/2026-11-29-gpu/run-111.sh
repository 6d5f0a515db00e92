#!/usr/bin/env bash
# Call 111 on nvidia-h200 (commit 4c61204: wgpu waits across backends release their flag writes
# and next host function on the relay's thread; the plug-in commits have no GPU place): the
# whole suite in parallel, the hand-offs twice, the pipelines once.
# Build: cargo xtask gpu-bundle --features cuda,wgpu,hip --out gpurun/bundle, pruned to
# conformance, bench-cross, example-hetero, the CUDA GPU and soundness tests and the HIP shim,
# plus docs/results/gpu-run-lib.sh and COMMIT; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched conformance-parallel 150 env DEVSTREAM_TEST_STACKS_AFTER=140 $P ./conformance
run bench-cross 60 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --handoffs-only
run bench-cross-2 60 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --handoffs-only
run bench-cross-pipelines 150 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross-pipelines.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only
run cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
tar czf $OUT/results.tgz -C $R .
