#!/usr/bin/env bash
# Issue 12 (call 4): pinned host buffers forget the uses of finished, dropped streams.
# The new test on the code before the fix (devstream-cuda-soundness-before-hostbuffer) and after,
# the whole soundness and CUDA GPU tests after, memcheck over the new test, gpu-common unit tests.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1; echo "exit status: $? ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result\|ERROR SUMMARY\|RACECHECK SUMMARY\|live streams went' $R/$name.txt | tail -n 2 | tr '\n' ' ') $(tail -n 1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
T=long_lived_buffers_do_not_keep_every_finished_stream_that_used_them_alive
run before-$T 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness-before-hostbuffer $T --exact --test-threads=1
run after-$T 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness $T --exact --test-threads=1
run memcheck-$T 120 env DEVSTREAM_REQUIRE=cuda $S --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-soundness $T --exact --test-threads=1
run soundness-all 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-soundness --test-threads=1
run cuda-gpu-tests 60 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run gpu-common-unit-tests 60 ./devstream-gpu-common-tests --test-threads=2
run conformance-cuda-hip 200 env DEVSTREAM_REQUIRE=cuda,hip DEVSTREAM_PLACES=cuda:0,hip:0 ./conformance
