#!/usr/bin/env bash
# Call 46 (issue 14, CPU goal) on the H100's 16-core host: the in-process all-reduce with the
# ranks sharing each buffer's lock for the whole reduction (each touches only its own slice),
# against the committed exclusive lock per chunk, alternating, 4 ranks 4 times; 2 and 8 once.
# bench-comm-cpu-before: b41b49b; bench-comm-cpu-shared: b41b49b plus the change committed as
# e1a6cba (`cargo build --release -p devstream-bench --features comm --bin bench-comm-cpu`).
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
for k in 1 2 3 4; do
  run before-ranks4-$k 60 ./bench-comm-cpu-before --ranks 4 --iters 15
  run shared-ranks4-$k 60 ./bench-comm-cpu-shared --ranks 4 --iters 15
done
for n in 2 8; do
  run before-ranks$n 60 ./bench-comm-cpu-before --ranks $n --iters 15
  run shared-ranks$n 60 ./bench-comm-cpu-shared --ranks $n --iters 15
done
for f in $R/*.txt; do echo "$(basename $f .txt): $(grep -h 'memcpy, one\|all_reduce /' $f | tr '\n' ' ' | sed 's/  */ /g')"; done
tar czf $OUT/results.tgz -C $R .
