#!/usr/bin/env bash
# Call 51 on one H100 (2026-11-25): the CUDA elision test with its new case (an event recorded
# by a second stream is never elided again), the suite on cpu,cuda,hip, and bench-step twice
# (does the owner-based event mark still elide the step's 10 defensive waits: 318 calls/step?).
# Build: cargo xtask gpu-bundle --features cuda,hip --out bundle; COMMIT, gpu-run-lib.sh, this script.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched cuda-elide 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide --test-threads=1
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run bench-step-cuda-1 60 ./bench-workload-cuda step
run bench-step-cuda-2 60 ./bench-workload-cuda step
grep -h "eager\|replay\|calls" $R/bench-step-cuda-*.txt | head -20
tar czf $OUT/results.tgz -C $R .
