#!/usr/bin/env bash
# Counts the instructions of bench-wgpu's "record+query" row per iteration, devstream vs raw
# wgpu, with callgrind (no timing). Usage: run.sh OUTDIR [N] [WARM] [REPS]
# Run from the repository root after
#   cargo build --release -p devstream-bench --features wgpu --bin cost-wgpu-record-query
set -euo pipefail
out=${1:?outdir}; n=${2:-1000}; warm=${3:-100}; reps=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
bin=${CARGO_TARGET_DIR:-target}/release/cost-wgpu-record-query
mkdir -p "$out"
for rep in $(seq 1 "$reps"); do
  for side in dev raw noted; do
    f="$out/$side.$rep"
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect="*cost_${side}_loop*" \
      --callgrind-out-file="$f.callgrind" "$bin" --side "$side" --n "$n" --warm "$warm" \
      > "$f.log" 2>&1
    ir=$(grep -oP 'Collected : \K[0-9]+' "$f.log")
    echo "rep $rep $side: $((ir / n)) Ir/iteration ($(grep -h 'ns/call' "$f.log"))"
    callgrind_annotate --threshold=100 --auto=no "$f.callgrind" > "$f.self" 2>/dev/null
    callgrind_annotate --inclusive=yes --threshold=100 --auto=no "$f.callgrind" > "$f.incl" 2>/dev/null
  done
done
files() { seq -s, -f "$out/$1.%g.self" 1 "$reps"; }
python3 "$here/categories.py" "$n" devstream="$(files dev)" raw="$(files raw)" raw-noted="$(files noted)"
