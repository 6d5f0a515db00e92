#!/usr/bin/env bash
# Call 87 (owed; for the session after 2026-11-28's fourth) on nvidia-h200: compute-sanitizer
# memcheck over every cross section on cpu and cuda:0 with a limit that lets it finish (call 79
# stopped it after 12 of 13 `cross::` tests at 280 s), then the cross sections on every place
# serially. The two checks that lose a device on purpose are skipped under the sanitizer: a
# trapped kernel does not end under it as without it (calls 79 and 93).
# Build: as run-86.sh (one bundle for both); carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
run memcheck-cross 420 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross --test-threads=1 --skip an_error_of_the_awaited_work
watched cross-serial 150 env DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance cross --test-threads=1
tar czf $OUT/results.tgz -C $R .
