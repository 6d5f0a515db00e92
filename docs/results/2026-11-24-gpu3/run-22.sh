#!/usr/bin/env bash
# Issues 16 and 15 (call 22): notifier streams made with the device (a completion never creates a
# stream: raw cuStreamCreateWithPriority stalls while other streams are held, see
# 22-stream-create-stalls/), devstream kernel launches no longer turn wait elision off. The whole
# suite on cpu,cuda,hip with elision on and off, the completion tests watched, the CUDA crate
# tests, wake latency, the step and priority benchmarks. conformance has symbols (stacks on a hang).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched completion-cuda-hip 90 env DEVSTREAM_TEST_STACKS_AFTER=75 DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance completion --test-threads=1
run conformance-elide-on 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 120 env DEVSTREAM_TEST_STACKS_AFTER=100 DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run cuda-elide-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-elide
run bench-wake-cuda 40 ./bench-wake --place cuda:0 --samples 2000
run example-async-cuda 20 ./example-async --place cuda:0
run bench-step-cuda 60 ./bench-workload-cuda step
run bench-priority-cuda 30 ./bench-workload-cuda priority
for f in bench-step-cuda bench-priority-cuda; do tail -n 12 $R/$f.txt; done
