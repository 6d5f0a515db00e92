#!/usr/bin/env bash
# Call 61 (2026-11-27/28), two GPUs: the correctness issue's work merged (capture, sizes, device
# loss, collectives, deferred releases outside their lock, alloc in Relaxed mode) on hardware:
# the suite with every place of both GPUs, elision off on one, the CUDA GPU and soundness tests,
# the collectives on cuda:0,1 and hip:0,1 (pip NCCL as RCCL through the shim), compute-sanitizer
# memcheck over the capture and size checks, and bench-cuda before (32e8a58) and after,
# alternating.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm --out gpurun/bundle (this commit);
# bench-cuda-old: cargo build --release -p devstream-bench --bin bench-cuda --features cuda at 32e8a58.
set -u
cd gpurun
. bundle/gpu-run-lib.sh
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt
watched conformance-all-places 200 env DEVSTREAM_TEST_STACKS_AFTER=190 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_PLACES=cpu,cuda:0,cuda:1,hip:0,hip:1 ./conformance
watched conformance-noelide 120 env DEVSTREAM_ELIDE_WAITS=0 DEVSTREAM_TEST_STACKS_AFTER=110 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance
watched cuda-gpu-tests 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-soundness 100 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run comm-cuda-2gpu 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
run memcheck-capture-sizes 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./conformance capture:: sizes::
{ for i in 1 2 3; do echo "== old $i $(date +%T)"; timeout 60 ./bench-cuda-old 2>&1 | grep "^cuda "; echo "== new $i $(date +%T)"; timeout 60 ./bench-cuda 2>&1 | grep "^cuda "; done; } > $R/bench-cuda-old-new.txt 2>&1
echo "bench: $(grep -c '^cuda' $R/bench-cuda-old-new.txt) rows"
tar czf $OUT/results.tgz -C $R .
