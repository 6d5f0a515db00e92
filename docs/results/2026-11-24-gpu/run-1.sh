#!/usr/bin/env bash
# Issue 12, GPU runs owed (call 1 of 2): the handles-dropped check on cuda:0 and hip:0 with a longer
# whole-check limit and backtraces if it stalls, then the whole conformance suite on cpu + cuda:0 + hip:0.
# Run from the repository root with the release bundle in bundle/ (cargo xtask gpu-bundle --features cuda,hip --out bundle).
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 NCCL_NVLS_ENABLE=0 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
save() { tar czf $OUT/results.tgz -C $R .; }
# watch NAME LIMIT STALL cmd...: runs cmd; if it still runs after STALL seconds, takes backtraces of
# every process of this bundle (the isolated children included), then lets it go on to LIMIT.
watch() {
  local name=$1 limit=$2 stall=$3; shift 3; local s=$(date +%s)
  { hdr "$@"; } > $R/$name.txt
  timeout -s KILL $limit "$@" >> $R/$name.txt 2>&1 & local P=$! t=0 bt=0
  while kill -0 $P 2>/dev/null; do
    sleep 1; t=$((t+1))
    if [ $t -eq $stall ] && [ $bt -eq 0 ]; then bt=1
      for pid in $(pgrep -f "$B/conformance|\./conformance"); do
        echo "=== pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline | cut -c1-200)"
        for tid in /proc/$pid/task/*; do echo "$(basename $tid) $(cat $tid/comm) $(cat $tid/wchan 2>/dev/null)"; done
        timeout 60 ${GDB:-gdb} -p $pid -batch -ex "set pagination off" -ex "thread apply all bt 30" 2>&1 | grep -v "^\[New LWP\|^warning" | head -1500
      done > $R/$name-backtraces.txt 2>&1
    fi
  done
  wait $P; echo "exit status: $? ($(( $(date +%s)-s )) s)" >> $R/$name.txt
  echo "$name: $(grep -h 'test result' $R/$name.txt | tail -1) $(tail -n 1 $R/$name.txt)"; save
}
command -v gdb >/dev/null || GDB=/usr/local/cuda/bin/cuda-gdb
echo "gdb: ${GDB:-gdb}"
HD=hostile::handles_dropped_in_every_order_on_another_thread
for i in 1 2 3 4 5; do
watch handles-dropped-cuda-$i 330 120 env DEVSTREAM_PLACES=cuda:0 DEVSTREAM_CONFORMANCE_ISOLATED_SECS=280 ./conformance $HD --exact --nocapture
grep -h "ok in a child\|did not return" $R/handles-dropped-cuda-$i.txt | tail -n 3
done
for i in 1 2 3; do
watch conformance-all-$i 200 150 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
done
for i in 1 2 3; do
watch handles-dropped-hip-$i 120 100 env DEVSTREAM_PLACES=hip:0 DEVSTREAM_CONFORMANCE_ISOLATED_SECS=90 ./conformance $HD --exact --nocapture
grep -h "drop order\|ok in a child\|did not return" $R/handles-dropped-hip-$i.txt | tail -n 3
done
