#!/usr/bin/env bash
# Call 52 on one H100 (2026-11-25): the last code change of the session (record reads the
# elision epoch only under the tracker guard): the CUDA elision test and the suite on cpu,cuda,hip.
# Build: cargo xtask gpu-bundle --features cuda,hip --out bundle; COMMIT, gpu-run-lib.sh, this script.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched cuda-elide 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide --test-threads=1
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
tar czf $OUT/results.tgz -C $R .
