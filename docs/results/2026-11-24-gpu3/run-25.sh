#!/usr/bin/env bash
# Issue 15 (call 25): the per-call rows after the facade's dispatch of record / wait_event /
# wait_stream / query was inlined (-14 to -20 instructions per call against the null driver,
# docs/results/2026-11-24-cuda-cost/), bench-step eager once more, and the wgpu rows and step on
# the H100's Vulkan driver (wgpu part 5 and part 2 on a GPU).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run bench-cuda 90 ./bench-cuda
run bench-step-cuda 60 ./bench-workload-cuda step
run bench-wgpu 120 ./bench-wgpu
run bench-step-wgpu 90 ./bench-step --place wgpu:0
for f in bench-cuda bench-step-cuda bench-wgpu bench-step-wgpu; do tail -n 16 $R/$f.txt; done
