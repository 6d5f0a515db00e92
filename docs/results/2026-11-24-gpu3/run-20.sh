#!/usr/bin/env bash
# Issue 16 (call 20): why the whole conformance suite hangs on cuda/hip when run in parallel (run 19:
# killed at 150 s, elision on and off) while the completion tests pass alone. Each run prints every
# thread's stack itself (DEVSTREAM_TEST_STACKS_AFTER, tests/conformance/stacks.rs: no gdb there).
# Also: the thread-count test with thread names, and bench-priority with many short blocks.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
watched completion-cuda 60 env DEVSTREAM_TEST_STACKS_AFTER=45 DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0 ./conformance completion --test-threads=1
run conformance-parallel 90 env DEVSTREAM_TEST_STACKS_AFTER=70 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance
run conformance-serial 130 env DEVSTREAM_TEST_STACKS_AFTER=120 DEVSTREAM_REQUIRE=cpu,cuda,hip ./conformance --test-threads=1
run conformance-parallel-cuda-no-completion 80 env DEVSTREAM_TEST_STACKS_AFTER=60 DEVSTREAM_PLACES=cuda:0 ./conformance --skip completion
run conformance-parallel-cuda 80 env DEVSTREAM_TEST_STACKS_AFTER=60 DEVSTREAM_PLACES=cuda:0 ./conformance
run bench-priority-cuda-short-blocks 30 ./bench-workload-cuda priority --blocks 32768 --spin-us 50
run bench-priority-cuda-shorter-blocks 30 ./bench-workload-cuda priority --blocks 65536 --spin-us 20
for f in $R/conformance-*.txt; do echo "== $f"; grep -h "test result\|running for over\|FAILED\|DEVSTREAM_TEST_STACKS" $f | head -20; done
