#!/usr/bin/env bash
# Issues 16 and 15 (call 23): after run 22 (every test but dropped_completions_leave_nothing_live
# passed; it made a stream while its other stream was held), that test makes its streams first;
# the elide test likewise; bench-step alternates its eager variants over 7 rounds.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched completion-cuda-hip 100 env DEVSTREAM_TEST_STACKS_AFTER=90 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance completion --test-threads=1
run conformance-elide-on 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched cuda-elide-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide
run bench-step-cuda 90 ./bench-workload-cuda step
tail -n 8 $R/bench-step-cuda.txt
