#!/usr/bin/env bash
# Call 105 on nvidia-h200 (commit 095fdad: devices opened before any check holds a gate; once
# a Global capture was begun, checked queries and synchronizes in Relaxed mode): the Global
# capture check five times alone, the whole suite in parallel, host_fn_buffers alone, the
# hand-offs, memcheck over the checks of host functions behind waits and given buffers on cpu
# and cuda:0, the CUDA GPU and soundness tests.
# Build: as run-104.sh (conformance-sym built with symbols, bench-cross from the bundle).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
for i in 1 2 3 4 5; do
  run global-capture-$i 30 env $P ./conformance-sym capture::global_captures_begun_while_another_thread_synchronizes_are_never_invalidated
done
watched conformance-parallel 170 env DEVSTREAM_TEST_STACKS_AFTER=160 $P ./conformance-sym
watched host-fn-buffers 60 env DEVSTREAM_TEST_STACKS_AFTER=50 $P ./conformance-sym host_fn_buffers
run bench-cross 60 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --handoffs-only
run memcheck-behind 150 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance-sym cross_behind host_fn_buffers cross_hostile --test-threads=4
run cuda-gpu-soundness 60 sh -c "./devstream-cuda-gpu && ./devstream-cuda-soundness"
tar czf $OUT/results.tgz -C $R .
