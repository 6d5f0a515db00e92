#!/usr/bin/env bash
# OWED, NOT RUN YET (issue 14): what the two-GPU machine (`nvidia-h200-x2`) must run. Bundle:
#   cargo xtask gpu-bundle --features cuda,hip,comm,trace --out bundle
# then `run(kind="nvidia-h200-x2", carry=["bundle"], command="bash bundle/run-x2-owed.sh")`.
# NVLink multicast stays off (it can take a shared host's GPUs out of service).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
TORCH_PY=$(ls /opt/torch/.venv/bin/python 2>/dev/null || command -v python3)
nvidia-smi topo -m > $R/topology.txt 2>&1
# The collectives suite with two ranks: one process driving both GPUs (threads), and the
# rank-per-process tests inside it; then HIP through the shim with that NCCL as RCCL.
run comm-cuda-2gpu 300 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 300 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
run example-allreduce-2proc 120 ./example-allreduce --place cuda --ranks 2
# Bandwidth and small-message latency beside torch.distributed, in the same call, alternating.
for k in 1 2; do
  run sweep-cuda-2ranks-$k 400 ./bench-comm sweep --place cuda --ranks 2 --max-bytes 4294967296 --iters 20
  run peers-comm-2ranks-$k 400 $TORCH_PY peers_comm.py --ranks 2 --max-bytes 4294967296 --iters 20
done
# Overlap: all-reduce of chunk i beside compute of chunk i+1, and its timeline.
run overlap-cuda-2ranks 200 ./bench-comm overlap --place cuda --ranks 2 --chunks 8 --chunk-mib 64 --svg $R/overlap-2ranks.svg
# compute-sanitizer memcheck on one rank's process of the suite.
command -v compute-sanitizer >/dev/null && run memcheck-comm 600 compute-sanitizer --tool memcheck env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_PLACES=cuda:0 ./comm_gpu --test-threads=1
tar czf $OUT/results.tgz -C $R .
