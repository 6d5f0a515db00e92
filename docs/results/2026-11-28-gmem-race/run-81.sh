#!/usr/bin/env bash
# Call 81 (2026-11-28, third session) on nvidia-h200: call 79 found pool_model's capture
# programs crashing on cuda:0 and call 80 a capture invalidated by a synchronous free; the fix
# holds synchronous frees (cuMemFree of graph blocks, frees without pools) while a capture begun
# through devstream may be active, and the pools' drain never asks a capturing stream. The pool
# sections on cuda:0, then on hip:0, serially with a stack watchdog.
# Build: cargo test --release --no-run -p devstream --test conformance --features cpu,trace,cuda,hip,comm,wgpu.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
watched pools-cuda 130 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance pool --test-threads=1 --nocapture
watched pools-hip 90 env DEVSTREAM_TEST_STACKS_AFTER=80 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./conformance pool --test-threads=1 --nocapture
tar czf $OUT/results.tgz -C $R .
