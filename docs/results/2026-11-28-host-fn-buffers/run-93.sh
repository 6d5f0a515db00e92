#!/usr/bin/env bash
# Call 93 on nvidia-h200: the pipelines after the snapshot of a host buffer's queued copies
# became a completion of a use event that no copy records again while the completion holds it
# (the next copy on that stream takes a fresh event). Call 92's completions asked the use
# event's current record, which the next copy had moved behind the host function awaiting it:
# the pipelines hung. The hetero example; bench-cross (200 hand-off samples); the
# host_fn_buffers and cross sections on every place; memcheck over host_fn_buffers and cross on
# cpu and cuda:0 as far as the time allows.
# Build: as run-90.sh; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
run example-hetero 45 env CUDA_VISIBLE_DEVICES=0 ./example-hetero 2000 64
run bench-cross 120 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_BENCH_JSON=$R/bench-cross.jsonl ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --samples 200
watched host-fn-buffers-cross 100 env DEVSTREAM_TEST_STACKS_AFTER=90 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance host_fn_buffers cross
run memcheck-host-fn-buffers-cross 200 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance host_fn_buffers cross --test-threads=1
tar czf $OUT/results.tgz -C $R .
