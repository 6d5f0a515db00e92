#!/usr/bin/env bash
# Issues 16, 15, 14 (call 19, the next session's): completions with the bounded hub (watched), the
# whole conformance suite with elision on and off, the CUDA crate tests, NCCL init deadline, wake latency, workload benchmarks and peers.
# Run: cp docs/results/gpu-run-lib.sh docs/results/2026-11-24-gpu3/run-19.sh bundle/ after building the
# bundle (cargo xtask gpu-bundle --features cuda,hip,plugin,comm --out bundle), then bash bundle/run-19.sh.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched completion-cuda 60 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance completion --test-threads=1
watched completion-hip 60 env DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./conformance completion --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run conformance-elide-on 150 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 150 env DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
run comm-init-deadline 60 env DEVSTREAM_REQUIRE=cuda ./comm_gpu gpu_init_without_the_other_ranks_times_out_instead_of_hanging --exact --test-threads=1
run bench-wake-cuda 40 ./bench-wake --place cuda:0 --samples 2000
run bench-wake-hip 40 ./bench-wake --place hip:0 --samples 2000
run example-async-cuda 20 ./example-async --place cuda:0
run bench-step-cuda 100 ./bench-workload-cuda step
run bench-priority-cuda 60 ./bench-workload-cuda priority --blocks 2048 --spin-us 500
run peers-step 120 python3 peers_cuda.py step
run peers-priority 60 python3 peers_cuda.py priority
run bench-scale-cuda 120 ./bench-scale --place cuda:0
grep -h "HUNG" -A40 $R/*.txt | head -60
for f in bench-step-cuda bench-priority-cuda peers-step peers-priority; do tail -n 25 $R/$f.txt; done
