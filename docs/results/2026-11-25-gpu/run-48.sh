#!/usr/bin/env bash
# Call 48 on one H100 (2026-11-25): the current code against the whole conformance suite on
# cpu,cuda,hip with elision on and off, the async-completion tests watched alone on cuda:0 +
# hip:0, the CUDA soundness and GPU tests, wake latency (issue 16's goal), example-async, and
# bench-cuda once (issue 15 part 5).
# Build: cargo xtask gpu-bundle --features cuda,hip,plugin,comm --out bundle;
# git rev-parse --short HEAD > bundle/COMMIT; cp docs/results/gpu-run-lib.sh docs/results/2026-11-25-gpu/run-48.sh bundle/
# Run: bash bundle/run-48.sh (carry bundle).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched completion-cuda-hip 120 env DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance completion --test-threads=1
watched cuda-soundness 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run bench-wake-cuda 60 ./bench-wake --place cuda:0 --samples 2000
run bench-wake-hip 60 ./bench-wake --place hip:0 --samples 2000
run example-async-cuda 30 ./example-async --place cuda:0
run bench-cuda 120 ./bench-cuda
grep -h "p50\|p99\|ratio" $R/bench-wake-cuda.txt | tail -n 12
tail -n 3 $R/example-async-cuda.txt
grep -i "stream create\|record_event \|wait_event \|wait_stream\|query idle\|synchronize idle" $R/bench-cuda.txt | head -10
tar czf $OUT/results.tgz -C $R .
