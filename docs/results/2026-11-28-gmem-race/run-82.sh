#!/usr/bin/env bash
# Call 82 (2026-11-28, third session) on nvidia-h200, the session's last device seconds: the pool
# sections with the model's allowance for bytes dropped under a running capture, on cuda:0 and
# hip:0, 48 programs per place (PROPTEST_CASES) to fit the time left.
# Build: cargo test --release --no-run -p devstream --test conformance --features cpu,trace,cuda,hip,comm,wgpu (stripped).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
watched pools-cuda 55 env PROPTEST_CASES=48 DEVSTREAM_TEST_STACKS_AFTER=50 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance pool --test-threads=1 --nocapture
watched pools-hip 45 env PROPTEST_CASES=48 DEVSTREAM_TEST_STACKS_AFTER=40 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./conformance pool --test-threads=1 --nocapture
tar czf $OUT/results.tgz -C $R .
