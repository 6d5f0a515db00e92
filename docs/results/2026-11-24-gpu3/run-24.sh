#!/usr/bin/env bash
# Issue 14 (call 24), one H100 (no two-GPU machine lent this session): the NCCL engine with one rank
# (DEVSTREAM_COMM_MIN_RANKS=1): every op x type x reduction, send/recv, capture and replay of an
# all-reduce, lifetimes, bad input, ranks as processes; the same for hip:0 with RCCL = NCCL through
# the HIP-on-CUDA shim; compute-sanitizer memcheck on the in-process tests. NCCL_NVLS_ENABLE=0.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
echo "NCCL: $NCCL"
watched comm-cuda-one-rank 240 env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./comm_gpu --test-threads=1
watched comm-hip-one-rank 240 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./comm_gpu --test-threads=1
S=/usr/local/cuda/bin/compute-sanitizer
run comm-cuda-memcheck 200 env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_PLACES=cuda:0 $S --tool memcheck --report-api-errors no --error-exitcode 9 ./comm_gpu --test-threads=1 --skip processes --skip dies --skip init_without
