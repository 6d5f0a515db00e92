#!/usr/bin/env bash
# Call 38 (issue 14): the new bench-comm and peers_comm.py on ONE GPU (one rank: NCCL's
# single-rank all-reduce is a copy on the device), to have both ready for the two-GPU machine:
# the sweep to 4 GiB beside torch.distributed, and the overlap step with its timeline.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
TORCH_PY=$(ls /opt/torch/.venv/bin/python 2>/dev/null || command -v python3)
run sweep-cuda-1rank 240 ./bench-comm sweep --place cuda --ranks 1 --max-bytes 4294967296 --iters 20
run peers-comm-1rank 300 $TORCH_PY peers_comm.py --ranks 1 --max-bytes 4294967296 --iters 20
run overlap-cuda-1rank 120 ./bench-comm overlap --place cuda --ranks 1 --chunks 8 --chunk-mib 64 --svg $R/overlap-1rank.svg
ls -la $R; tar czf $OUT/results.tgz -C $R .
