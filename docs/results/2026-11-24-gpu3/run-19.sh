#!/usr/bin/env bash
# Issues 16, 15, 14 (call 19, the next session's): completions with the bounded hub (watched), the
# whole conformance suite with elision on and off, the CUDA crate tests, NCCL init deadline, wake latency, workload benchmarks and peers.
set -u
B=$PWD/bundle; R=$OUT/r; mkdir -p $R; cd $B
export RUST_BACKTRACE=1 DEVSTREAM_HIP_LIBRARY=$B/libdevstream_hip_shim.so
hdr() { echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $(nproc) CPUs, kernel $(uname -r)"; echo "# devstream commit: $(cat COMMIT 2>/dev/null)"; echo "# command: $*"; echo; }
cap() { head -c 3000000; }
run() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; timeout -s KILL $t "$@" 2>&1 | cap; echo "exit status: ${PIPESTATUS[0]} ($(( $(date +%s)-s )) s)"; } > $R/$name.txt; echo "$name: $(grep -h 'test result\|ERROR SUMMARY' $R/$name.txt | tail -n 1) $(tail -n 1 $R/$name.txt)"; grep -h "on [a-z_]*:[0-9]: returned Err\|whole check): panicked\|^test .* FAILED" $R/$name.txt | cut -c1-200 | sort | uniq -c | head; tar czf $OUT/results.tgz -C $R .; }
# A test binary with a watchdog: after $t s, the stacks of every thread (gdb or eu-stack if
# present, else /proc wchan and kernel stacks), then kill.
watched() { local name=$1 t=$2; shift 2; local s=$(date +%s); { hdr "$@"; "$@" > $R/$name.out 2>&1 & local pid=$!; local n=0; while kill -0 $pid 2>/dev/null && [ $n -lt $t ]; do sleep 1; n=$((n+1)); done;
  if kill -0 $pid 2>/dev/null; then echo "HUNG after $t s; processes:"; for p in $pid $(pgrep -P $pid) $(pgrep -f "conformance" | grep -v $pid); do echo "== pid $p: $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-200)"; for d in /proc/$p/task/*; do echo "  $(cat $d/comm 2>/dev/null) wchan=$(cat $d/wchan 2>/dev/null)"; done; if command -v gdb >/dev/null; then timeout 60 gdb -q -batch -ex "thread apply all bt 25" -p $p 2>&1 | grep -v "^\[New LWP" | head -c 400000; elif command -v eu-stack >/dev/null; then timeout 60 eu-stack -p $p 2>&1 | head -c 400000; fi; done; kill -KILL $pid $(pgrep -P $pid) 2>/dev/null; fi; wait $pid; echo "exit status: $? ($(( $(date +%s)-s )) s)"; head -c 2000000 $R/$name.out; } > $R/$name.txt; rm -f $R/$name.out; echo "$name: $(grep -h 'test result\|HUNG' $R/$name.txt | tail -n 1) $(grep -h '^exit status' $R/$name.txt)"; grep -h "^test .* \(FAILED\|ok\)$\|^test .*\.\.\. *$" $R/$name.txt | tail -n 3; tar czf $OUT/results.tgz -C $R .; }
echo "gdb: $(command -v gdb) eu-stack: $(command -v eu-stack)"
watched completion-cuda 100 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance completion --test-threads=1
watched completion-cuda 45 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance completion --test-threads=1
watched completion-cuda 60 env DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance completion --test-threads=1
watched completion-hip 60 env DEVSTREAM_REQUIRE=hip DEVSTREAM_PLACES=hip:0 ./conformance completion --test-threads=1
watched cuda-gpu-tests 90 env DEVSTREAM_REQUIRE=cuda ./devstream-cuda-gpu --test-threads=1
run conformance-elide-on 150 env DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-elide-off 150 env DEVSTREAM_REQUIRE=cpu,cuda,hip DEVSTREAM_ELIDE_WAITS=0 ./conformance
run comm-init-deadline 60 env DEVSTREAM_REQUIRE=cuda ./comm_gpu gpu_init_without_the_other_ranks_times_out_instead_of_hanging --exact --test-threads=1
run bench-wake-cuda 40 ./bench-wake --place cuda:0 --samples 2000
run bench-wake-hip 40 ./bench-wake --place hip:0 --samples 2000
run example-async-cuda 20 ./example-async --place cuda:0
run bench-step-cuda 100 ./bench-workload-cuda step
run bench-priority-cuda 60 ./bench-workload-cuda priority --blocks 2048 --spin-us 500
run peers-step 120 python3 peers_cuda.py step
run peers-priority 60 python3 peers_cuda.py priority
run bench-scale-cuda 120 ./bench-scale --place cuda:0
grep -h "HUNG" -A40 $R/*.txt | head -60
for f in bench-step-cuda bench-priority-cuda peers-step peers-priority; do tail -n 25 $R/$f.txt; done
