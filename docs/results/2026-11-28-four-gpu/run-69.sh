#!/usr/bin/env bash
# Call 69 (2026-11-28) on nvidia-h200-x4: what the eight-GPU issue asks, at four GPUs while no
# eight-GPU kind is lent: the GPUs' links; the collectives suite with four ranks on cuda:0..3 and
# hip:0..3 (pip NCCL as RCCL through the shim); the all-reduce example with four processes;
# bench-comm sweep at 2 and 4 ranks beside peers_comm.py (torch.distributed, NCCL), alternating;
# bench-comm overlap at 4 ranks with 8, 16 and 32 chunks (the bound is n/(n+1)).
# Build: cargo xtask gpu-bundle --features cuda,hip,comm --out gpurun/bundle (commit in COMMIT).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
nvidia-smi topo -m >> $R/devices.txt 2>&1
P=$B/peers_comm.py
run comm-cuda-4gpu 200 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1,cuda:2,cuda:3 ./comm_gpu --test-threads=1
run comm-hip-4gpu 200 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1,hip:2,hip:3 ./comm_gpu --test-threads=1
run example-allreduce-4proc 60 ./example-allreduce --place cuda --ranks 4
for i in 1 2; do
  for n in 2 4; do
    run sweep-cuda-${n}ranks-$i 120 ./bench-comm sweep --place cuda --ranks $n --max-bytes 2147483648
    run peers-comm-${n}ranks-$i 150 env PYTHONUNBUFFERED=1 python3 $P --ranks $n --max-bytes 2147483648
  done
done
run overlap-cuda-4ranks-16 90 ./bench-comm overlap --place cuda --ranks 4 --chunks 16 --chunk-mib 32 --svg $R/overlap-4ranks-16chunks.svg
run overlap-cuda-4ranks-32 90 ./bench-comm overlap --place cuda --ranks 4 --chunks 32 --chunk-mib 16
run overlap-cuda-4ranks-8 90 ./bench-comm overlap --place cuda --ranks 4 --chunks 8 --chunk-mib 64
grep -h "max(compute" $R/overlap-*.txt
tar czf $OUT/results.tgz -C $R .
