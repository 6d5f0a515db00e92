#!/usr/bin/env bash
# Call 49 on one H100 (2026-11-25): this session's code (devstream-paddle's settled record,
# the wgpu encode path) against the whole suite on cpu,cuda,hip; the devstream-paddle round trip
# on devstream_cuda:0 + devstream_hip:0; bench-cuda three times (issue 15 part 5's per-call
# rows, to read their spread).
# Build: cargo xtask gpu-bundle --features cuda,hip,plugin,comm --out bundle;
# cargo xtask paddle-plugins --features cuda,hip --release --out bundle/paddle-plugins;
# git rev-parse --short HEAD > bundle/COMMIT; cp docs/results/gpu-run-lib.sh docs/results/2026-11-25-gpu/run-49.sh bundle/
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run roundtrip 240 env DEVSTREAM_TEST_STACKS_AFTER=220 DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0,devstream_hip:0 ./conformance
for i in 1 2 3; do run bench-cuda-$i 120 ./bench-cuda; done
for i in 1 2 3; do grep -i "stream create\|record_event \|wait_event \|wait_stream\|query idle\|synchronize idle\|elision on" $R/bench-cuda-$i.txt | head -10; done
tar czf $OUT/results.tgz -C $R .
