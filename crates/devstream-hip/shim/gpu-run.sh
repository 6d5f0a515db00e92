#!/usr/bin/env bash
# The HIP backend's conformance run through devstream-hip-shim (HIP-on-CUDA) on an NVIDIA GPU.
set -u
cd "$(dirname "$0")"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
export DEVSTREAM_HIP_LIBRARY="$PWD/libdevstream_hip_shim.so"
export RUST_BACKTRACE=1
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
{
  echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
  echo "# devstream commit: $(cat COMMIT); conformance sources sha256/16: $(cat SUITE_SHA)"
  echo "# runtime: DEVSTREAM_HIP_LIBRARY=libdevstream_hip_shim.so (HIP-on-CUDA shim; no AMD hardware involved)"
  echo
  echo "## 1. conformance suite, one process: DEVSTREAM_REQUIRE=cpu,hip ./conformance --nocapture"
  start=$(date +%s%N)
  DEVSTREAM_REQUIRE=cpu,hip timeout 100 ./conformance --nocapture > /tmp/suite.txt 2>&1
  suite=$?
  cat /tmp/suite.txt
  echo "exit status: $suite  (wall $(ms $start) ms)"
  again=$(sed -n -e 's/^test \(.*\) \.\.\. FAILED$/\1/p' -e 's/^test \(.*\) has been running for over 60 seconds$/\1/p' /tmp/suite.txt | sort -u)
  if [ -n "$again" ]; then
    echo
    echo "## 1b. the failed or hung tests again, each alone on hip:0 (10 s cap each)"
    for t in $again; do
      DEVSTREAM_PLACES=hip:0 timeout 10 ./conformance --exact "$t" >/tmp/one.txt 2>&1
      rc=$?
      echo "$t: exit status $rc"
      [ "$rc" != 0 ] && grep -m4 -E "panicked|should be|failed|Err\(" /tmp/one.txt | cut -c1-400
    done
  fi
  echo
  echo "## 2. example: ./hip (examples/hip.rs, the CuPy streams tutorial on hip:0, PTX kernel)"
  timeout 30 ./hip 2>&1
  echo "exit status: $?"
  if [ "$suite" != 124 ]; then
    echo
    echo "## 3. conformance on hip:0 with hipLaunchHostFunc treated as absent (ROCm 5.2 emulation:"
    echo "##    host functions through hipStreamAddCallback): DEVSTREAM_HIP_DISABLE=hipLaunchHostFunc"
    start=$(date +%s%N)
    DEVSTREAM_HIP_DISABLE=hipLaunchHostFunc DEVSTREAM_PLACES=hip:0 DEVSTREAM_REQUIRE=hip timeout 40 ./conformance 2>&1 | grep -v '^\[conformance\]' | tail -60
    echo "exit status: ${PIPESTATUS[0]}  (wall $(ms $start) ms)"
  fi
} > "$OUT/hip-shim-conformance.txt" 2>&1
tail -30 "$OUT/hip-shim-conformance.txt"
