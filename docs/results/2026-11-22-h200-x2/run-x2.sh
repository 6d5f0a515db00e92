#!/usr/bin/env bash
# devstream on two GPUs: the conformance suite on cpu + cuda:0/1 + hip:0/1 (HIP-on-CUDA shim), so
# the cross-device cases run, and the CUDA crate's GPU tests (multi_device_cross_wait).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 RUST_BACKTRACE=1
B="$(cd "$(dirname "$0")" && pwd)"; cd $B
export DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# devices: $(nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tr '\n' ';')"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
{ hdr env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance --nocapture; DEVSTREAM_REQUIRE=cpu,cuda,hip timeout 200 ./conformance --nocapture 2>&1; echo "exit status: $?"; } > $OUT/conformance-x2.txt
grep -E "cross_device|test result" $OUT/conformance-x2.txt
{ hdr env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1 --nocapture; DEVSTREAM_REQUIRE=cuda timeout 120 ./devstream-cuda-gpu --test-threads=1 --nocapture 2>&1; echo "exit status: $?"; } > $OUT/cuda-gpu-tests-x2.txt
grep -E "multi_device|test result" $OUT/cuda-gpu-tests-x2.txt
