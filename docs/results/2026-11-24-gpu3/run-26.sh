#!/usr/bin/env bash
# Issue 15/16 (call 26): call 25's bench-cuda showed the host-function round trip at 1.24 (it was
# 1.05 on 2026-11-22). A/B in one call: bench-cuda-old is fce57e6 (before this session's code:
# notifier streams made lazily), bench-cuda is 8629686 (17 internal streams made with the device,
# inlined dispatch); alternated twice.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run bench-cuda-old-1 90 ./bench-cuda-old
run bench-cuda-new-1 90 ./bench-cuda
run bench-cuda-old-2 90 ./bench-cuda-old
run bench-cuda-new-2 90 ./bench-cuda
grep -h "host func\|record_event\|wait_event (\|stream create" $R/bench-cuda-*.txt
