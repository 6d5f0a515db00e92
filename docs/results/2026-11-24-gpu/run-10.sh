#!/usr/bin/env bash
# Issues 12/13 (call 10): a graph's host function knows the stream of the launch running it, so
# its host-buffer access skips that stream's copies (before/after), then the round trip again.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so DEVSTREAM_PADDLE_LOG=1
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result\|ERROR SUMMARY' $R/$name.txt | tail -n 1) $(tail -n 1 $R/$name.txt)"; grep -h "on devstream_[a-z]*:[0-9]: returned Err\|on devstream_[a-z]*:[0-9] (whole check): panicked" $R/$name.txt | cut -c1-150 | sort | uniq -c; tar czf $OUT/results.tgz -C $R .; }
T=captured_host_function_writes_a_host_buffer_that_a_later_copy_on_the_launching_stream_uploads
run before-$T 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness-before-graph $T --exact --test-threads=1
run after-$T 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness $T --exact --test-threads=1
run memcheck-$T 120 env DEVSTREAM_REQUIRE=cuda /usr/local/cuda/bin/compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-soundness $T --exact --test-threads=1
run soundness-all 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run conformance-cpu-cuda-hip 200 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-all-places 250 env DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins ./conformance
