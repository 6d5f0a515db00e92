#!/usr/bin/env bash
# devstream second GPU run: sanitizers (memcheck on the conformance suite, racecheck and memcheck on
# the CUDA crate's GPU tests), a second bench-cuda sample, bench-cpu, pipeline chunk sizes.
set -u
B="$(cd "$(dirname "$0")" && pwd)"; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs"; echo "# devstream commit: $(cat COMMIT)"; echo "# command: $*"; echo; }
run() { local name=$1 t=$2; shift 2; { hdr "$@"; timeout $t "$@" 2>&1; echo "exit status: $?"; } > $R/$name.txt; echo "$name: $(tail -1 $R/$name.txt)"; tar czf $OUT/results.tgz -C $R .; }
S=/usr/local/cuda/bin/compute-sanitizer
run sanitizer-memcheck-conformance 150 env DEVSTREAM_PLACES=cuda:0 $S --tool memcheck --report-api-errors no --leak-check full --error-exitcode 9 ./conformance --skip stress --skip model --test-threads=1
tail -3 $R/sanitizer-memcheck-conformance.txt
run sanitizer-racecheck-gpu-tests 150 env DEVSTREAM_REQUIRE=cuda $S --tool racecheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-gpu --test-threads=1
tail -3 $R/sanitizer-racecheck-gpu-tests.txt
run sanitizer-memcheck-gpu-tests 100 env DEVSTREAM_REQUIRE=cuda $S --tool memcheck --report-api-errors no --error-exitcode 9 ./devstream-cuda-gpu --test-threads=1
tail -3 $R/sanitizer-memcheck-gpu-tests.txt
run bench-cuda 120 env DEVSTREAM_BENCH_JSON=$R/rows-cuda.jsonl ./bench-cuda
run bench-cpu 120 env DEVSTREAM_BENCH_JSON=$R/rows-cpu.jsonl ./bench-cpu
run pipeline-8MiB 60 ./example-pipeline 1024 8
run pipeline-16MiB 60 ./example-pipeline 1024 16
run pipeline-32MiB 60 ./example-pipeline 1024 32
