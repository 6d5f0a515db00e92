#!/usr/bin/env bash
# Issue 16 (call 15): async completion on CUDA and HIP (shim): conformance, GPU tests, memcheck,
# wake latency, the async example; and the whole suite on every place (plug-in notifier rules).
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result\|ERROR SUMMARY' $R/$name.txt | tail -n 1) $(tail -n 1 $R/$name.txt)"; grep -h "on [a-z_]*:[0-9]: returned Err\|whole check): panicked\|^test .* FAILED" $R/$name.txt | cut -c1-200 | sort | uniq -c | head; tar czf $OUT/results.tgz -C $R .; }
run conformance-completion 150 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance completion
run cuda-gpu-tests 120 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run memcheck-completion 200 env DEVSTREAM_REQUIRE=cuda /usr/local/cuda/bin/compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-gpu completions_use_independent_notifiers_and_leave_captures_valid --test-threads=1
run bench-wake-cuda 120 ./bench-wake --place cuda:0 --samples 2000
run bench-wake-hip 120 ./bench-wake --place hip:0 --samples 2000
run example-async-cuda 60 ./example-async --place cuda:0
run example-async-hip 60 ./example-async --place hip:0
run conformance-cpu-cuda-hip 200 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-all-places 300 env DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PADDLE_LOG=1 ./conformance
tail -n 25 $R/bench-wake-cuda.txt
