#!/usr/bin/env bash
# Call 86 (owed; for the session after 2026-11-28's fourth) on nvidia-h200: the pool sections
# after efaa95b (graph-private blocks from a devstream pool, freed stream-ordered) and dfd14db
# (managed memory freed on the free thread) on cuda:0 and hip:0 with the property test's
# default 48 programs and more; memcheck over the pool sections (property test with 8
# programs); the CUDA GPU tests (managed memory); the whole suite in parallel on every place;
# the pool benchmark (alloc+drop, churn, the captured step, whose allocations inside the
# capture now go through the pool).
# Build: cargo xtask gpu-bundle --features cuda,hip,comm,wgpu --out gpurun/bundle; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
watched pools-cuda 60 env PROPTEST_CASES=256 DEVSTREAM_TEST_STACKS_AFTER=55 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance pool --test-threads=1 --nocapture
watched pools-hip 60 env PROPTEST_CASES=256 DEVSTREAM_TEST_STACKS_AFTER=55 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./conformance pool --test-threads=1 --nocapture
run memcheck-pools 150 env PROPTEST_CASES=8 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance pool --test-threads=1
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
watched conformance-parallel 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0 ./conformance
run bench-pools-cuda 60 ./bench-pools --place cuda:0
tar czf $OUT/results.tgz -C $R .
