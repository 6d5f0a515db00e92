#!/usr/bin/env bash
# Call 39 (issue 14) on nvidia-h200-x2: the two-GPU runs owed since issue 14 was filed
# (docs/results/2026-11-24-gpu3/run-x2-owed.sh without its memcheck line).
# NVLink multicast stays off (it can take a shared host's GPUs out of service).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
TORCH_PY=$(ls /opt/torch/.venv/bin/python 2>/dev/null || command -v python3)
nvidia-smi topo -m > $R/topology.txt 2>&1
# The collectives suite with two ranks: one process driving both GPUs (threads), and the
# rank-per-process tests inside it; then HIP through the shim with that NCCL as RCCL.
run comm-cuda-2gpu 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
run example-allreduce-2proc 60 ./example-allreduce --place cuda --ranks 2
# Bandwidth and small-message latency beside torch.distributed, in the same call, alternating.
for k in 1 2; do
  run sweep-cuda-2ranks-$k 120 ./bench-comm sweep --place cuda --ranks 2 --max-bytes 4294967296 --iters 20
  run peers-comm-2ranks-$k 120 $TORCH_PY peers_comm.py --ranks 2 --max-bytes 4294967296 --iters 20
done
# Overlap: all-reduce of chunk i beside compute of chunk i+1, and its timeline.
run overlap-cuda-2ranks 90 ./bench-comm overlap --place cuda --ranks 2 --chunks 8 --chunk-mib 64 --svg $R/overlap-2ranks.svg
# compute-sanitizer memcheck on one rank's process of the suite.
# (memcheck: a separate call if time allows)
tar czf $OUT/results.tgz -C $R .
