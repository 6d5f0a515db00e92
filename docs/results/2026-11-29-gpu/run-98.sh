#!/usr/bin/env bash
# Call 98 on nvidia-h200 (same bundle as call 96): the single-device pipelines at 16, 32 and
# 64 KiB chunks, 16 in flight: how the time per chunk grows with the chunk's bytes.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
for kib in 16 32 64; do
  run pipelines-16-${kib}k 40 env CUDA_VISIBLE_DEVICES=0 ./bench-cross --places cpu,cuda:0,hip:0 --pipelines-only --slots 16 --chunk-kib $kib
done
tar czf $OUT/results.tgz -C $R .
