#!/usr/bin/env bash
# Calls 82-85 (2026-11-28, fourth session) on nvidia-h200: the pool sections with the model's
# allowance for bytes dropped under a running capture (9afe503), on cuda:0 and hip:0, 64 programs
# per place (PROPTEST_CASES; 48 in call 84); then compute-sanitizer memcheck over the pool sections on cuda:0
# (call 84: the pools:: and pools_capture:: sections, the property test left out for time).
# Build: cargo test --release --no-run -p devstream --test conformance --features cpu,trace,cuda,hip,comm,wgpu (stripped);
# bundle: that binary, libdevstream_hip_shim.so and gpu-run-lib.sh; carry [gpurun].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched pools-cuda 50 env PROPTEST_CASES=48 DEVSTREAM_TEST_STACKS_AFTER=45 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ../conformance pool --test-threads=1 --nocapture
watched pools-hip 40 env PROPTEST_CASES=48 DEVSTREAM_TEST_STACKS_AFTER=35 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ../conformance pool --test-threads=1 --nocapture
run memcheck-pools-cuda 40 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ../conformance pools --test-threads=1
tar czf $OUT/results.tgz -C $R .
