#!/usr/bin/env bash
# Call 107 on nvidia-h200 (the bundle of call 106, commit 77cdb07; nothing GPU-side changed
# after it): the one check of waits across backends memcheck had not finished (call 102), alone
# on cpu and cuda:0, with its places printed and stacks after 270 s; the pipelines.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
watched memcheck-dropped-waits 290 env DEVSTREAM_TEST_STACKS_AFTER=270 DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance-sym cross::waits_across_backends_dropped_before_they_resolve_leak_nothing --nocapture
run pipelines-4 60 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 4
tar czf $OUT/results.tgz -C $R .
