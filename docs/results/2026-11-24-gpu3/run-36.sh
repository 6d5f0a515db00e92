#!/usr/bin/env bash
# Call 36 (issue 15, part 5): the lazily made panic slot (e091bba) on the GPU: the suite on
# cpu,cuda,hip with elision on and off, the CUDA soundness, GPU and crate tests, NCCL/RCCL with
# one rank, and bench-cuda of e091bba against the commit before it, alternating, twice.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
run conformance-elide-on 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched cuda-soundness 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-crate-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-tests --test-threads=1
run comm-cuda-one-rank 120 env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./comm_gpu --test-threads=1
run comm-hip-one-rank 120 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./comm_gpu --test-threads=1
for k in 1 2; do
  run bench-cuda-after-$k 120 ./bench-cuda
  run bench-cuda-before-$k 120 ./bench-cuda-before
done
for f in $R/bench-cuda-*.txt; do echo "== $(basename $f)"; grep -i "stream create\|record_event \|wait_event \|query idle\|synchronize idle" $f | head -8; done
