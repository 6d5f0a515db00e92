#!/usr/bin/env bash
# Call 42 on one H100: this session's code (the facade's cold span path, the comm watchdog's
# failure-before-abort) against the suite on cpu,cuda,hip, the CUDA soundness, GPU and crate
# tests, NCCL/RCCL with one rank, and bench-cuda once.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
run conformance-elide-on 150 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
watched cuda-soundness 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run comm-cuda-one-rank 120 env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./comm_gpu --test-threads=1
run comm-hip-one-rank 120 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./comm_gpu --test-threads=1
run bench-cuda 120 ./bench-cuda
grep -i "stream create\|record_event \|wait_event \|wait_stream\|query idle\|synchronize idle" $R/bench-cuda.txt | head -10
tar czf $OUT/results.tgz -C $R .
