#!/usr/bin/env bash
# Call 60 (2026-11-27), one GPU: the correctness issue's GPU items on hardware.
# Items 6 and 7 before (devstream-cuda-gpu-before: gpu-common at d17d06d, the tests of 6a40954)
# and after (this commit), the whole CUDA GPU binary, and the conformance suite on cuda:0 and
# hip:0 (HIP-on-CUDA shim) with the new capture, size and device-loss checks, elision on and off,
# and the capture checks under compute-sanitizer.
# Build: cargo test --release -p devstream-cuda --test gpu; cargo test --release -p devstream
# --no-default-features --features cpu,cuda,hip,trace --test conformance; cargo build --release
# -p devstream-hip-shim; binaries xz-compressed into gpurun/bundle (unstripped: line tables).
set -u
cd gpurun; for f in bundle/*.xz; do xz -d "$f"; done; chmod +x bundle/*
. bundle/gpu-run-lib.sh
T6=streams_dropped_on_another_thread_leave_a_capture_valid
T7=a_stream_dropped_during_its_capture_leaves_no_capture_behind
run item6-before 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu-before $T6 --exact --nocapture
run item7-before 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu-before $T7 --exact --nocapture
run item6-after 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu $T6 --exact --nocapture
run item7-after 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu $T7 --exact --nocapture
watched cuda-gpu-tests 150 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
watched conformance-cuda-hip 150 env DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,hip:0 ./conformance
watched conformance-cuda-hip-noelide 150 env DEVSTREAM_ELIDE_WAITS=0 DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance
run capture-memcheck 200 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 compute-sanitizer --tool memcheck --error-exitcode 9 ./conformance capture::
tar czf $OUT/results.tgz -C $R .
