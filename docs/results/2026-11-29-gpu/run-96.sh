#!/usr/bin/env bash
# Call 96 on nvidia-h200: the fixes of call 95's findings (the HIP shim's stream calls inside
# host functions, 39df397; pool calls in Relaxed capture mode, 123e0c1) and the plug-in fixes
# (nothing there for a GPU place, but the whole suite runs them): host_fn_buffers and pools on
# every place, the whole suite in parallel; the pipelines with the host's submission time per
# chunk; memcheck over pools, then over cross, on cpu and cuda:0, each alone.
# Build: cargo xtask gpu-bundle --features cuda,wgpu,hip --out gpurun/bundle, pruned to
# conformance, bench-cross, example-hetero, the CUDA GPU and soundness tests and the HIP shim,
# plus docs/results/gpu-run-lib.sh and COMMIT; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched host-fn-buffers-pools 90 env DEVSTREAM_TEST_STACKS_AFTER=80 $P ./conformance host_fn_buffers pools --test-threads=1
watched conformance-parallel 150 env DEVSTREAM_TEST_STACKS_AFTER=140 $P ./conformance
run pipelines-4 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 4
run pipelines-16 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0,wgpu:0 --pipelines-only --slots 16
run cuda-gpu-soundness 60 sh -c "./devstream-cuda-gpu && ./devstream-cuda-soundness"
run memcheck-pools 100 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance pool --test-threads=4
run memcheck-cross 150 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance cross:: --test-threads=8
tar czf $OUT/results.tgz -C $R .
