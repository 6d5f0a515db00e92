#!/usr/bin/env bash
# Call 35 (issue 14): bench-comm-cpu with memcpy and all-reduce interleaved per iteration, against
# the committed form (all memcpys first), alternating, 4 ranks, three rounds; then 2 and 8 ranks.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
for k in 1 2 3; do
  run before-ranks4-$k 60 ./bench-comm-cpu-before --ranks 4 --iters 15
  run interleaved-ranks4-$k 60 ./bench-comm-cpu-interleaved --ranks 4 --iters 15
done
run interleaved-ranks2 60 ./bench-comm-cpu-interleaved --ranks 2 --iters 15
run interleaved-ranks8 60 ./bench-comm-cpu-interleaved --ranks 8 --iters 15
for f in $R/*.txt; do echo "$(basename $f): $(grep -h 'memcpy, one\|all_reduce /' $f | tr '\n' ' ' | sed 's/  */ /g')"; done
