#!/usr/bin/env bash
# Call 40 (issue 14) on nvidia-h200-x2: the overlap step with 16 and 32 chunks (8 chunks of
# equal compute and communication can reach at most 8/9 = 0.889: the first compute and the last
# all-reduce overlap nothing), and the two comm_gpu failures of call 39 alone with NCCL's warnings.
set -u
. "$(dirname "$0")/gpu-run-lib.sh"
export NCCL_NVLS_ENABLE=0
run overlap-cuda-2ranks-16 90 ./bench-comm overlap --place cuda --ranks 2 --chunks 16 --chunk-mib 32 --svg $R/overlap-2ranks-16chunks.svg
run overlap-cuda-2ranks-32 90 ./bench-comm overlap --place cuda --ranks 2 --chunks 32 --chunk-mib 16
run overlap-cuda-2ranks-8 90 ./bench-comm overlap --place cuda --ranks 2 --chunks 8 --chunk-mib 64
grep -h "max(compute" $R/overlap-*.txt
run captured-nccl-warn 120 env NCCL_DEBUG=WARN DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu gpu_captured_all_reduce_runs_again_with_the_peers_on_every_launch --exact --nocapture --test-threads=1
run peer-dies-nccl-warn 150 env NCCL_DEBUG=WARN DEVSTREAM_REQUIRE=cuda DEVSTREAM_PLACES=cuda:0,cuda:1 ./comm_gpu gpu_a_peer_that_dies_fails_the_survivor_by_the_deadline_instead_of_hanging --exact --nocapture --test-threads=1
tar czf $OUT/results.tgz -C $R .
