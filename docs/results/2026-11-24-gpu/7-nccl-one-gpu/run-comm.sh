#!/usr/bin/env bash
# Issue 14: the NCCL (CUDA) and RCCL (HIP through the HIP-on-CUDA shim) collectives engine on a
# machine with 2 GPUs and the nvidia-nccl-cu13 wheel. Writes $OUT/comm/*.txt and $OUT/comm.tgz.
set -u
B=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-/tmp/out}; R=$OUT/comm; mkdir -p "$R"; cd "$B"
export RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0
NCCL_LIB=${DEVSTREAM_NCCL_LIBRARY:-$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib/libnccl.so.2")' 2>/dev/null)}
[ -f "$NCCL_LIB" ] || NCCL_LIB=$(find /usr /opt /root -path '*nvidia/nccl/lib/libnccl.so.2' 2>/dev/null | head -1)
SHIM="DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so DEVSTREAM_RCCL_LIBRARY=$NCCL_LIB"
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# devices: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tr '\n' ';')"; echo "# devstream commit: $(cat COMMIT); NCCL: $NCCL_LIB"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL "$t" "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > "$R/$name.txt"; echo "$name: $(grep -h 'test result' "$R/$name.txt" | tail -n 1) $(tail -n 1 "$R/$name.txt")"; tar czf "$OUT/comm.tgz" -C "$R" .; }
run 1-nccl-library 60 env DEVSTREAM_REQUIRE=nccl ./gpu-common-tests comm --nocapture
run 2-no-nccl-typed-errors 60 ./devstream-cuda-no_nccl --nocapture
run 3-comm-gpu-cuda 400 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1 --nocapture
run 4-example-allreduce-cuda 120 ./example-allreduce --place cuda
run 5-comm-gpu-hip-shim-rccl-is-nccl 400 env $SHIM DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1 --nocapture
run 6-example-allreduce-hip-shim 120 env $SHIM ./example-allreduce --place hip
run 7-no-rccl-typed-errors-hip-shim 60 env DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so ./devstream-hip-no_rccl --nocapture
