#!/usr/bin/env bash
# Call 106 on nvidia-h200 (commit after 095fdad: host functions behind waits across backends
# released by a word the stream writes, read by the device's host-function thread, no event and
# no doorbell): host_fn_buffers alone, the whole suite in parallel, the Global capture check
# three times, the hand-offs, memcheck over the checks of host functions behind waits, given
# buffers, hostile and interplay waits on cpu and cuda:0.
# Build: as run-104.sh (conformance-sym built with symbols, bench-cross from the bundle).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched host-fn-buffers 60 env DEVSTREAM_TEST_STACKS_AFTER=50 $P ./conformance-sym host_fn_buffers
watched conformance-parallel 170 env DEVSTREAM_TEST_STACKS_AFTER=160 $P ./conformance-sym
for i in 1 2 3; do
  run global-capture-$i 30 env $P ./conformance-sym capture::global_captures_begun_while_another_thread_synchronizes_are_never_invalidated
done
run bench-cross 60 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --handoffs-only
run memcheck-behind 150 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance-sym cross_behind host_fn_buffers cross_hostile cross_interplay --test-threads=4
tar czf $OUT/results.tgz -C $R .
