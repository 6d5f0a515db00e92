#!/usr/bin/env bash
# Call 110 on nvidia-h200 (commit 03a381d: the wait words' wait and write share one queueing
# path, no change of behaviour): the checks of waits across backends and host functions given
# buffers on cpu, cuda:0, hip:0, wgpu:0.
# Build: cargo xtask gpu-bundle --features cuda,wgpu,hip --out gpurun/bundle, pruned to
# conformance and the HIP shim, plus docs/results/gpu-run-lib.sh and COMMIT; carry [gpurun, .gl].
set -u
cd gpurun
. bundle/gpu-run-lib.sh
gpu_setup
P="DEVSTREAM_REQUIRE=cpu,cuda,hip,wgpu DEVSTREAM_PLACES=cpu,cuda:0,hip:0,wgpu:0"
watched cross-and-buffers 120 env DEVSTREAM_TEST_STACKS_AFTER=110 $P ./conformance cross host_fn_buffers
tar czf $OUT/results.tgz -C $R .
