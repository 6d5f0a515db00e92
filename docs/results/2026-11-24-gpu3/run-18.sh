#!/usr/bin/env bash
# Issue 16 (call 18): completions on CUDA/HIP with the bounded hub (16 doorbells per device, one
# sweeper thread), watched one place at a time; the CUDA crate's completion test; wake latency.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched completion-cuda 45 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance completion --test-threads=1
watched cuda-gpu-completion 30 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu completion --test-threads=1
watched completion-hip 40 env DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./conformance completion --test-threads=1
run bench-wake-cuda 25 ./bench-wake --place cuda:0 --samples 1000
run example-async-cuda 15 ./example-async --place cuda:0
