#!/usr/bin/env bash
# Call 41 (issue 14) on nvidia-h200-x2: comm_gpu with the captured test's eager warm-up
# (NCCL connects peers on a communicator's first collective, which a capture refuses), on
# cuda:0,1 and hip:0,1 (RCCL = the pip NCCL through the shim).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
run comm-cuda-2gpu 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
tar czf $OUT/results.tgz -C $R .
