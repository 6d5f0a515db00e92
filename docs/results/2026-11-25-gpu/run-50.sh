#!/usr/bin/env bash
# Call 50 on one H100 (2026-11-25): an event's elision mark without a lock of its own (one
# owner stream, positions written under its tracker guard, untrusted for good once a second
# stream records it). Checks: the CUDA elision test, the whole suite on cpu,cuda,hip with
# elision on and off, the completion tests, the CUDA soundness tests; then bench-cuda before
# (bench-cuda-before: the commit before the change) and after, alternating three times.
# Build: cargo xtask gpu-bundle --features cuda,hip --out bundle; the previous commit's
# bench-cuda copied in as bundle/bench-cuda-before; COMMIT, gpu-run-lib.sh and this script.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched cuda-elide 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide --test-threads=1
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched cuda-soundness 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
for i in 1 2 3; do run bench-cuda-before-$i 120 ./bench-cuda-before; run bench-cuda-after-$i 120 ./bench-cuda; done
for f in $R/bench-cuda-*.txt; do echo "== $(basename $f)"; grep -i "record_event \|wait_event (\|stream create\|elision on" $f | head -6; done
tar czf $OUT/results.tgz -C $R .
