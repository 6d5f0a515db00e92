#!/usr/bin/env bash
# Call 101 on nvidia-h200 (bundle of call 100, commit 4e2a488): memcheck over the hostile and
# interplay checks of waits across backends and over host functions given host buffers, on cpu
# and cuda:0, eight test threads.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
run memcheck-cross-hostile-interplay 540 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross_hostile cross_interplay host_fn_buffers --test-threads=8
tar czf $OUT/results.tgz -C $R .
