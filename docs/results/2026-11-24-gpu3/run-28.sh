#!/usr/bin/env bash
# The session's last code (call 28): the whole suite on cpu,cuda,hip with elision on and off, the
# completion tests watched, the CUDA crate tests, the elide test, NCCL/RCCL with one rank.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
NCCL=$(python3 -c 'import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],"lib","libnccl.so.2"))' 2>/dev/null)
run conformance-elide-on 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched completion-cuda-hip 100 env DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance completion --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-elide-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide
run cuda-crate-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-tests --test-threads=1
run comm-cuda-one-rank 120 env DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./comm_gpu --test-threads=1
run comm-hip-one-rank 120 env DEVSTREAM_RCCL_LIBRARY=$NCCL DEVSTREAM_COMM_MIN_RANKS=1 DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./comm_gpu --test-threads=1
run example-async-cuda 20 ./example-async --place cuda:0
