#!/usr/bin/env bash
# Two-GPU hang diagnosis: backtraces of a hung parallel conformance run, and variants.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RUST_BACKTRACE=1
B="$(cd "$(dirname "$0")" && pwd)"; cd $B
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $OUT/devices.txt
nvidia-smi topo -m >> $OUT/devices.txt 2>&1
which cuda-gdb >> $OUT/devices.txt 2>&1
run() { # name seconds env...
  local name=$1 secs=$2; shift 2
  echo "# $(date -u +%FT%TZ) commit $(cat COMMIT): env $* ./conformance --nocapture" > $OUT/$name.txt
  env "$@" ./conformance --nocapture >> $OUT/$name.txt 2>&1 &
  local P=$! t=0
  while kill -0 $P 2>/dev/null && [ $t -lt $secs ]; do sleep 1; t=$((t+1)); done
  if kill -0 $P 2>/dev/null; then
    echo "HUNG after ${secs}s" | tee -a $OUT/$name.txt
    if [ "${BT:-0}" = 1 ]; then
      for tid in /proc/$P/task/*; do echo "$(basename $tid) $(cat $tid/comm) $(cat $tid/wchan 2>/dev/null)"; done > $OUT/$name-tasks.txt
      timeout 150 cuda-gdb -p $P -batch -ex "set pagination off" -ex "thread apply all bt 40" > $OUT/$name-bt.txt 2>&1
    fi
    kill -9 $P; pkill -9 conformance
  else wait $P; echo "exit $? after ${t}s" | tee -a $OUT/$name.txt; fi
  grep -c "\.\.\. ok" $OUT/$name.txt
}
BT=1 run par-cuda01 60 DEVSTREAM_PLACES=cpu,cuda:0,cuda:1
run par-cuda1-only 60 DEVSTREAM_PLACES=cuda:1
run par-cuda01-maxconn32 60 DEVSTREAM_PLACES=cpu,cuda:0,cuda:1 CUDA_DEVICE_MAX_CONNECTIONS=32
run par-cuda10 60 DEVSTREAM_PLACES=cuda:1,cuda:0
