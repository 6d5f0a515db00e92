#!/usr/bin/env bash
# Call 56 (2026-11-27) on nvidia-h200-x2 (two GPUs): the two-GPU run owed for issue 14 since
# 2026-11-24 (run-43.sh: the dying-peer test after 699a3f2/2914b13, then comm_gpu on cuda:0,1 and
# hip:0,1, RCCL = the pip NCCL through the shim), and the whole conformance suite with every
# place of both GPUs at once (cross-device cases) at this code, which no two-GPU machine has run
# since 2026-11-22 (the stream reuse, the event mark, the completion hub came after).
# Build: cargo xtask gpu-bundle --features cuda,hip,plugin,comm --out bundle;
# git rev-parse --short HEAD > bundle/COMMIT; cp docs/results/gpu-run-lib.sh docs/results/2026-11-27-gpu/run-56.sh bundle/
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
run peer-dies-cuda 120 env NCCL_DEBUG=WARN DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu gpu_a_peer_that_dies_fails_the_survivor_by_the_deadline_instead_of_hanging --exact --nocapture --test-threads=1
run comm-cuda-2gpu 180 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 180 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
run conformance-x2-all-places 200 env DEVSTREAM_TEST_STACKS_AFTER=170 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,hip:0,hip:1 ./conformance
watched cuda-gpu-tests-x2 150 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
tar czf $OUT/results.tgz -C $R .
