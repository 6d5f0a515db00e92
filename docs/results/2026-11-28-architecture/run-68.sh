#!/usr/bin/env bash
# Call 68 (2026-11-28), two GPUs: a stream-taking driver call that fails while another device's
# context is current on the thread runs once more on its own device's context (gpu-common
# Device::on_own_context), for the lost-context failure of calls 66 and 67: the suite with every
# place of both GPUs, elision off, the CUDA GPU and soundness tests, comm on both GPUs.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm --out gpurun/bundle (main 05ead58 plus
# that change, on_own_context.patch in 68-two-h200/; not committed: it did not help).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched conformance-all-places 300 env DEVSTREAM_TEST_STACKS_AFTER=280 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,hip:0,hip:1 ./conformance
watched conformance-noelide 150 env DEVSTREAM_ELIDE_WAITS=0 DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,hip:0,hip:1 ./conformance
watched cuda-gpu-tests 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run comm-cuda-2gpu 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
{ for i in 1; do echo "== new $i $(date +%T)"; timeout 70 ./bench-cuda 2>&1 | grep "^cuda "; done; } > $R/bench-cuda.txt 2>&1
tar czf $OUT/results.tgz -C $R .
