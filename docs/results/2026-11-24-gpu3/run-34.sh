#!/usr/bin/env bash
# Issue 13 (call 34): the devstream-paddle round trip at the evening's code, on the whole suite as
# it is now (96 tests): devstream-plugin loads devstream-paddle's libdevstream_cuda.so /
# libdevstream_hip.so (`cargo xtask paddle-plugins --features cuda,hip --release`), and the
# conformance suite runs on devstream_cuda:0 and devstream_hip:0, then on every place at once.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
for i in 1 2; do
run roundtrip-$i 240 env DEVSTREAM_TEST_STACKS_AFTER=220 DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0,devstream_hip:0 DEVSTREAM_PADDLE_LOG=1 ./conformance
done
run conformance-all-places 280 env DEVSTREAM_TEST_STACKS_AFTER=260 DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PADDLE_LOG=1 ./conformance
grep -h "answered" $R/*.txt | grep -v "out of memory\|exceed" | sort | uniq -c | head -20
