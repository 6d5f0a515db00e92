#!/usr/bin/env bash
# The evening session's last code (call 33): the CPU in-process all-reduce on the 16-core host
# (three runs of 4 ranks, 2 and 8 ranks, and the same run's memcpy ceilings), the suite on
# cpu,cuda,hip with elision on and off, the CUDA GPU tests, NCCL/RCCL with one rank.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
for k in 1 2 3; do run comm-cpu-ranks4-$k 60 ./bench-comm-cpu --ranks 4 --iters 15; done
run comm-cpu-ranks2 60 ./bench-comm-cpu --ranks 2 --iters 15
run comm-cpu-ranks8 60 ./bench-comm-cpu --ranks 8 --iters 15
run pmemcpy 60 sh -c './pmemcpy 1; ./pmemcpy 4; ./pmemcpy 1; ./pmemcpy 4'
grep -h "all_reduce /\|threads" $R/comm-cpu-*.txt $R/pmemcpy.txt
run conformance-elide-on 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run comm-cuda-one-rank 120 env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./comm_gpu --test-threads=1
run comm-hip-one-rank 120 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./comm_gpu --test-threads=1
run example-async-cuda 20 ./example-async --place cuda:0
