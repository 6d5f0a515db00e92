#!/usr/bin/env bash
# Issues 12 + 13 (call 5): a host function's host-buffer access skips its own stream's copies
# (before/after), and the round trip devstream-plugin -> devstream-paddle -> devstream CUDA/HIP:
# the whole conformance suite on cpu, cuda:0, hip:0, devstream_cuda:0, devstream_hip:0.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result\|ERROR SUMMARY\|places under test' $R/$name.txt | tail -n 3 | tr '\n' ' ') $(tail -n 1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
T=host_function_writes_a_host_buffer_that_a_later_copy_on_its_stream_uploads
run before-$T 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness-before-own-stream $T --exact --test-threads=1
run after-$T 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness $T --exact --test-threads=1
run memcheck-$T 120 env DEVSTREAM_REQUIRE=cuda $S --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-soundness $T --exact --test-threads=1
run soundness-all 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run gpu-common-unit-tests 60 ./devstream-gpu-common-tests --test-threads=2
run conformance-with-paddle-plugins 300 env DEVSTREAM_REQUIRE=cpu,cuda,hip,plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins ./conformance
run conformance-devstream-cuda-only 300 env DEVSTREAM_REQUIRE=plugin DEVSTREAM_PLUGIN_PATH=$B/paddle-plugins DEVSTREAM_PLACES=devstream_cuda:0,devstream_hip:0 ./conformance
