#!/usr/bin/env bash
# Call 102 on nvidia-h200 (bundle of call 100): memcheck over the two `cross::` checks that did
# not finish under it in call 97, alone, on cpu and cuda:0.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
run memcheck-cross-slow 540 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross::wait_stream_of_another_backend_does_not_wait_for_later_work cross::waits_across_backends_dropped_before_they_resolve_leak_nothing --test-threads=2
tar czf $OUT/results.tgz -C $R .
