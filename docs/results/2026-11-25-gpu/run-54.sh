#!/usr/bin/env bash
# Call 54 on one H100 (2026-11-25): devstream-paddle's fast paths (c247c8c: the table's
# create/record/wait/synchronize/query/destroy event and set_device try a lean path first; a
# live slot's state is its handle) and the facade's event/graph spans built only under a
# subscriber (1338bf1). Checks: the devstream-paddle round trip on devstream_cuda:0 +
# devstream_hip:0 (the fast paths on GPU backends), the whole suite on cpu,cuda,hip, the CUDA
# soundness and GPU tests.
# Build: cargo xtask gpu-bundle --features cuda,hip,plugin,comm --out bundle;
# cargo xtask paddle-plugins --features cuda,hip --release --out bundle/paddle-plugins (stripped);
# git rev-parse --short HEAD > bundle/COMMIT; cp docs/results/gpu-run-lib.sh docs/results/2026-11-25-gpu/run-54.sh bundle/
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run roundtrip 240 env DEVSTREAM_TEST_STACKS_AFTER=220 DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0,devstream_hip:0 ./conformance
run conformance 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
watched cuda-soundness 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
watched cuda-elide 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide --test-threads=1
tar czf $OUT/results.tgz -C $R .
