#!/usr/bin/env bash
# Call 103 on nvidia-h200 (commit fc47610: host functions behind waits across backends run by
# devstream from their event's completion): the new checks alone, the hand-offs, the whole
# suite in parallel, memcheck over the new checks and the interplay checks on cpu and cuda:0.
# Build: cargo xtask gpu-bundle --features cuda,wgpu,hip --out gpurun/bundle, pruned to
# conformance, bench-cross, example-hetero, the CUDA GPU and soundness tests and the HIP shim,
# plus docs/results/gpu-run-lib.sh and COMMIT; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched cross-behind 60 env DEVSTREAM_TEST_STACKS_AFTER=50 $P ./conformance cross_behind --test-threads=1
run bench-cross 100 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --handoffs-only
watched conformance-parallel 160 env DEVSTREAM_TEST_STACKS_AFTER=150 $P ./conformance
run memcheck-behind 120 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross_behind cross_interplay --test-threads=4
tar czf $OUT/results.tgz -C $R .
