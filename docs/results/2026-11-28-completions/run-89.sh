#!/usr/bin/env bash
# Call 89 on nvidia-h200: the completion hub's sweeper asks its questions in Relaxed capture
# mode (a Global capture begun on another thread between its capture check and a query was
# invalidated: call 88). The new check global_captures_begun_while_the_completion_hub_sweeps_
# stay_valid without the fix (cuda-gpu-unfixed) and with it, the CUDA GPU tests three times,
# the whole suite on every place.
# Build: cargo test --release -p devstream-cuda --test gpu --no-run (with and without the
# completion.rs change), conformance as in gpu-run-lib's notes; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
T=completions::global_captures_begun_while_the_completion_hub_sweeps_stay_valid
run sweep-capture-unfixed 60 env DEVSTREAM_REQUIRE=cuda ./cuda-gpu-unfixed $T --exact --test-threads=1
run sweep-capture-fixed 60 env DEVSTREAM_REQUIRE=cuda ./cuda-gpu-fixed $T --exact --test-threads=1
for i in 1 2 3; do run cuda-gpu-tests-$i 60 env DEVSTREAM_REQUIRE=cuda ./cuda-gpu-fixed --test-threads=1; done
watched conformance-parallel 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
tar czf $OUT/results.tgz -C $R .
