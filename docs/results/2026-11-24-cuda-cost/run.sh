#!/usr/bin/env bash
# Instructions devstream adds around CUDA driver calls, counted by callgrind against the null
# driver (no GPU). From the repository root:
#   cargo build --release -p devstream-bench-null-cuda
#   cargo build --release -p devstream-bench --features cuda --bin cost-cuda-ops
#   docs/results/2026-11-24-cuda-cost/run.sh OUTDIR [N] [WARM]
set -eu
out=${1:?output folder}; n=${2:-1000}; warm=${3:-100}
mkdir -p "$out/lib"
ln -sf "$PWD/target/release/libdevstream_null_cuda.so" "$out/lib/libcuda.so"
ln -sf "$PWD/target/release/libdevstream_null_cuda.so" "$out/lib/libcuda.so.1"
printf "%-16s %10s %10s %10s\n" op "dev Ir" "raw Ir" "added"
for op in record wait_event record_wait_off record_wait wait_stream query stream_create event_create; do
  for side in dev raw; do
    LD_LIBRARY_PATH="$out/lib" valgrind --tool=callgrind --collect-atstart=no \
      --toggle-collect="*cost_${side}_loop*" --callgrind-out-file="$out/$op-$side.out" \
      target/release/cost-cuda-ops --op $op --side $side --n $n --warm $warm >/dev/null 2>"$out/$op-$side.err"
  done
  dev=$(awk '/^(summary|totals):/{print $2; exit}' "$out/$op-dev.out")
  raw=$(awk '/^(summary|totals):/{print $2; exit}' "$out/$op-raw.out")
  printf "%-16s %10.1f %10.1f %10.1f\n" $op $(echo "$dev/$n" | bc -l) $(echo "$raw/$n" | bc -l) $(echo "($dev-$raw)/$n" | bc -l)
done
