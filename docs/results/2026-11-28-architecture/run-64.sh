#!/usr/bin/env bash
# Call 64 (2026-11-28), two GPUs: the architecture issue's restructuring (one contract with
# optional ops, core's dynamic/ erasure layer, shared rules in core, the CUDA/HIP raw tables split
# into api/, the collectives' descriptor) on hardware: the suite with every place of both GPUs,
# elision off on one, the CUDA GPU and soundness tests, the collectives on cuda:0,1 and hip:0,1
# (pip NCCL as RCCL through the shim), and bench-cuda, bench-workload-cuda step and bench-step
# before (built at deb36db, before the restructuring: "-old") and after, alternating.
# Build: cargo xtask gpu-bundle --features cuda,hip,comm --out gpurun/bundle (this commit);
# bench-step: cargo build --release -p devstream-bench --bin bench-step (stripped);
# the -old binaries: the same bins built at the commit in /work/gpu-old/COMMIT.
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
run cuda-elide 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide
run hip-installed-runtime 60 ./devstream-hip-installed_runtime
run comm-cuda-2gpu 150 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu --test-threads=1
run comm-hip-2gpu 150 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0,hip:1 ./comm_gpu --test-threads=1
run example-allreduce 60 ./example-allreduce
{ for i in 1 2; do for v in old new; do s=""; [ $v = old ] && s=-old; echo "== $v $i $(date +%T)"; timeout 70 ./bench-cuda$s 2>&1 | grep "^cuda "; done; done; } > $R/bench-cuda-old-new.txt 2>&1
echo "bench-cuda: $(grep -c '^cuda' $R/bench-cuda-old-new.txt) rows"
{ for i in 1 2 3; do for v in old new; do s=""; [ $v = old ] && s=-old; echo "== $v $i $(date +%T)"; timeout 40 ./bench-workload-cuda$s step 2>&1 | tail -n 12; echo "-- bench-step (cpu) $v $i"; timeout 40 ./bench-step$s 2>&1 | tail -n 8; done; done; } > $R/bench-step-old-new.txt 2>&1
echo "bench-step: $(grep -c 'elision on' $R/bench-step-old-new.txt) rows"
tar czf $OUT/results.tgz -C $R .
