#!/usr/bin/env bash
# Call 97 on nvidia-h200 (same bundle as call 96): memcheck over `cross::` on cpu and cuda:0
# without the two checks that make the awaited work fail on purpose (a device trap: under
# memcheck it is reported as such and ends the context for every test of the process); the
# pipelines with 4 KiB chunks (is the time per chunk bound by bytes or by a per-chunk cost?).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
run pipelines-16-4k 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0 --pipelines-only --slots 16 --chunk-kib 4
run memcheck-cross 330 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross:: --test-threads=8 --skip an_error_of_the_awaited_work
tar czf $OUT/results.tgz -C $R .
