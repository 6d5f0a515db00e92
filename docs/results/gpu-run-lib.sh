# Helpers the GPU-machine scripts under docs/results source (copied into the bundle beside them):
# run NAME SECONDS CMD... (output capped, exit status and time), watched NAME SECONDS CMD... (the
# same with a watchdog that prints every thread's wait channel and, where gdb or eu-stack exist,
# stacks of a hung test process before killing it). Results go to $OUT/r and $OUT/results.tgz.
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
# NVIDIA's Vulkan driver for wgpu (the .gl debs carried beside gpurun), and the devices into
# $R/devices.txt: what every script that runs wgpu:0 on the GPU machine does first.
gpu_setup() { for f in $B/../../.gl/*.deb; do dpkg -x $f /; done; ldconfig; local ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $ICD ] && export VK_DRIVER_FILES=$ICD __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $R/devices.txt; }
