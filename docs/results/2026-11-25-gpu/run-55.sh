#!/usr/bin/env bash
# Call 55 on one H100 (2026-11-25): idle dropped streams keep their native stream for the next
# new stream (2e7a705). Checks: the new GPU test and the rest of the CUDA GPU tests, CUDA
# soundness, the elision test, the whole suite on cpu,cuda,hip with elision on and off, the
# devstream-paddle round trip on devstream_cuda:0 + devstream_hip:0; then bench-cuda before
# (bench-cuda-before: 08c39a5) and after, alternating three times (the stream create row).
# Build: cargo xtask gpu-bundle --features cuda,hip,plugin,comm --out bundle;
# cargo xtask paddle-plugins --features cuda,hip --release --out bundle/paddle-plugins (stripped);
# 08c39a5's bench-cuda as bundle/bench-cuda-before;
# git rev-parse --short HEAD > bundle/COMMIT; cp docs/results/gpu-run-lib.sh docs/results/2026-11-25-gpu/run-55.sh bundle/
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
watched cuda-soundness 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
watched cuda-elide 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide --test-threads=1
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
run roundtrip 240 env DEVSTREAM_TEST_STACKS_AFTER=220 DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0,devstream_hip:0 ./conformance
for i in 1 2 3; do run bench-cuda-before-$i 120 ./bench-cuda-before; run bench-cuda-after-$i 120 ./bench-cuda; done
for f in $R/bench-cuda-*.txt; do echo "== $(basename $f)"; grep -i "record_event \|wait_event (\|stream create\|event create\|from the pool" $f | head -6; done
tar czf $OUT/results.tgz -C $R .
