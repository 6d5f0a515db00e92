#!/usr/bin/env bash
# Call 43 (issue 14) on nvidia-h200-x2: comm_gpu after 699a3f2 (the watchdog keeps a failure, and
# hands it to the streams with pending collectives, before ncclCommAbort releases their
# kernels), on cuda:0,1 and hip:0,1 (RCCL = the pip NCCL through the shim); the dying-peer test
# alone with NCCL's warnings first.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
run peer-dies-cuda 120 env NCCL_DEBUG=WARN DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu gpu_a_peer_that_dies_fails_the_survivor_by_the_deadline_instead_of_hanging --exact --nocapture --test-threads=1
run comm-cuda-2gpu 180 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 180 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
tar czf $OUT/results.tgz -C $R .
