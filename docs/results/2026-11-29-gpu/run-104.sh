#!/usr/bin/env bash
# Call 104 on nvidia-h200 (commit fc47610, conformance built with symbols for stacks): call
# 103's whole-suite run hung in host_fn_buffers and failed
# capture::global_captures_begun_while_another_thread_synchronizes_are_never_invalidated; each
# alone, with stacks after the hang.
# Build: as run-103.sh, plus conformance-sym (CARGO_PROFILE_RELEASE_STRIP=debuginfo
# CARGO_PROFILE_RELEASE_DEBUG=0 cargo test --release --no-run -p devstream --test conformance
# --features cpu,trace,cuda,wgpu,hip).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched global-capture 60 env DEVSTREAM_TEST_STACKS_AFTER=50 $P ./conformance-sym capture::global_captures_begun_while_another_thread_synchronizes_are_never_invalidated --nocapture
watched host-fn-buffers 90 env DEVSTREAM_TEST_STACKS_AFTER=40 $P ./conformance-sym host_fn_buffers --nocapture
watched host-fn-buffers-1 60 env DEVSTREAM_TEST_STACKS_AFTER=40 $P ./conformance-sym host_fn_buffers::a_host_function_given_a_buffer_runs_after_the_copies_from_it_submitted_before --nocapture
tar czf $OUT/results.tgz -C $R .
