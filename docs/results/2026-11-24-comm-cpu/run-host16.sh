#!/usr/bin/env bash
# bench-comm-cpu on the GPU machine's host (16 cores, no GPU used): the CPU reference engine's
# all-reduce of 64 MiB on 2, 4 and 8 ranks (threads) beside one-thread memcpy.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run comm-cpu-4 60 ./bench-comm-cpu --ranks 4
run comm-cpu-2 60 ./bench-comm-cpu --ranks 2
run comm-cpu-8 60 ./bench-comm-cpu --ranks 8
cat $R/comm-cpu-*.txt | grep -v "^#"
