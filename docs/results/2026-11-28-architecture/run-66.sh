#!/usr/bin/env bash
# Call 66 (2026-11-28), two GPUs: main with memory pools (phase 1: `alloc` now takes from the
# device's default pool through cuMemAllocFromPoolAsync; MemoryPool stats, threshold, trim and
# the out-of-memory trim-and-retry on cuMemPool*, HIP's hipMemPool* through the shim) and the
# cross-backend error test's fix for cuda:N/hip:N sharing one context: the suite with every place
# of both GPUs (pools:: and cross:: included), elision off, compute-sanitizer memcheck over
# pools:: and cross::, the CUDA GPU and soundness tests, the collectives on two GPUs.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm --out gpurun/bundle (this commit).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched conformance-all-places 300 env DEVSTREAM_TEST_STACKS_AFTER=280 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,hip:0,hip:1 ./conformance
watched conformance-noelide 150 env DEVSTREAM_ELIDE_WAITS=0 DEVSTREAM_TEST_STACKS_AFTER=140 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,hip:0 ./conformance
run memcheck-pools-cross 200 env DEVSTREAM_REQUIRE=cpu,cuda DEVSTREAM_PLACES=cpu,cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance pools:: cross::
watched cuda-gpu-tests 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run comm-cuda-2gpu 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
run example-cuda 60 ./example-cuda
tar czf $OUT/results.tgz -C $R .
