#!/usr/bin/env bash
# Call 99 on nvidia-h200 (same bundle as call 96): cpu → cuda:0 → cpu at 64 KiB chunks, 16 in
# flight, with the CPU backend's workers spinning or not (DEVSTREAM_CPU_SPIN) and 16 or 4
# workers (DEVSTREAM_CPU_WORKERS): is the waiting pipeline's time per chunk, which grows with
# the chunk's bytes faster than the fenced one's, a matter of threads competing for cores?
set -u
cd gpurun
. bundle/gpu-run-lib.sh
for spin in 1 0; do for workers in 16 4; do
  run pipe-spin${spin}-w${workers} 40 env CUDA_VISIBLE_DEVICES=0 DEVSTREAM_CPU_SPIN=$spin DEVSTREAM_CPU_WORKERS=$workers ./bench-cross --places cpu,cuda:0 --pipelines-only --slots 16 --chunk-kib 64
done; done
tar czf $OUT/results.tgz -C $R .
