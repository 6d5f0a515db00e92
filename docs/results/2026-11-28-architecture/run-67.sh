#!/usr/bin/env bash
# Call 67 (2026-11-28), two GPUs: the last duplicate-code removal touched the HIP-on-CUDA shim
# (out-pointer and cuDeviceGet helpers) and the HIP raw table's memory-pool calls, checked here
# only by the compiler: the suite on cpu and both GPUs through CUDA and the shim, the CUDA GPU
# tests, and the collectives over the shim on two GPUs.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm --out gpurun/bundle (this commit).
set -u
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched conformance-all-places 300 env DEVSTREAM_TEST_STACKS_AFTER=280 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,hip:0,hip:1 ./conformance
watched cuda-gpu-tests 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run hip-installed-runtime 60 ./devstream-hip-installed_runtime
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
run example-hip 60 ./example-hip
tar czf $OUT/results.tgz -C $R .
