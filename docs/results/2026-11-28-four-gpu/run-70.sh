#!/usr/bin/env bash
# Call 70 (2026-11-28) on nvidia-h200-x4: the conformance suite with cpu and every GPU of the
# host as a place (cuda:0..3, hip:0..3 through the HIP-on-CUDA shim), wait elision on and off,
# and the CUDA GPU and soundness tests. Same bundle as call 69.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
watched conformance-all-places 330 env DEVSTREAM_TEST_STACKS_AFTER=320 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,cuda:2,cuda:3,hip:0,hip:1,hip:2,hip:3 ./conformance
watched conformance-noelide 150 env DEVSTREAM_ELIDE_WAITS=0 DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,cuda:3,hip:1,hip:2 ./conformance
watched cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
tar czf $OUT/results.tgz -C $R .
