#!/usr/bin/env bash
# Issue 15 (call 27): bench-step on cuda:0 with the variants' order rotating from round to round,
# twice: is elision on's 1.06 (off: 1.03) an order effect?
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
run bench-step-cuda-1 60 ./bench-workload-cuda step
run bench-step-cuda-2 60 ./bench-workload-cuda step
grep -h "eager\|replay" $R/bench-step-cuda-*.txt
