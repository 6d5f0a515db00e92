#!/usr/bin/env bash
# Issue 16 (call 20 follow-up): run 20 found the suite stuck on hip:0 in completions_resolve_under_tokio
# with cpu,cuda,hip in one process (serial too): the test thread spins inside
# cuStreamCreateWithPriority while 16 streams are held at flag waits. Which places it takes, and
# whether more hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) change it. conformance-sym: the same
# suite with symbols (CARGO_PROFILE_RELEASE_STRIP=debuginfo) for readable stacks.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
T=completion::completions_resolve_under_tokio
run tokio-cuda 30 env DEVSTREAM_TEST_STACKS_AFTER=20 DEVSTREAM_PLACES=cuda:0 ./conformance-sym $T --exact
run tokio-hip 30 env DEVSTREAM_TEST_STACKS_AFTER=20 DEVSTREAM_PLACES=hip:0 ./conformance-sym $T --exact
run tokio-cuda-hip 30 env DEVSTREAM_TEST_STACKS_AFTER=20 DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance-sym $T --exact
run tokio-hip-cuda 30 env DEVSTREAM_TEST_STACKS_AFTER=20 DEVSTREAM_PLACES=hip:0,cuda:0 ./conformance-sym $T --exact
run tokio-cuda-hip-32conn 30 env CUDA_DEVICE_MAX_CONNECTIONS=32 DEVSTREAM_TEST_STACKS_AFTER=20 DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance-sym $T --exact
run completion-serial-cuda-hip 60 env DEVSTREAM_TEST_STACKS_AFTER=50 DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance-sym completion --test-threads=1
run completion-serial-cuda-hip-32conn 60 env CUDA_DEVICE_MAX_CONNECTIONS=32 DEVSTREAM_TEST_STACKS_AFTER=50 DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance-sym completion --test-threads=1
run suite-cpu-cuda-hip-32conn 90 env CUDA_DEVICE_MAX_CONNECTIONS=32 DEVSTREAM_TEST_STACKS_AFTER=80 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance-sym
run suite-hip 90 env DEVSTREAM_TEST_STACKS_AFTER=80 DEVSTREAM_PLACES=hip:0 ./conformance-sym
for f in $R/*.txt; do echo "== $f"; grep -h "test result\|running for over\|FAILED\|DEVSTREAM_TEST_STACKS" $f | head -8; done
