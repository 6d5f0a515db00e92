#!/usr/bin/env bash
# Call 37: the suite with the new completion test (97 tests) on cpu,cuda,hip with elision on and
# off, the completion tests watched alone on cuda:0 + hip:0, and the CUDA soundness tests.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched completion-cuda-hip 120 env DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance completion --test-threads=1
watched cuda-soundness 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
