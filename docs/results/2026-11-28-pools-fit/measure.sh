#!/bin/bash
export XDG_RUNTIME_DIR=$(mktemp -d)
cd /tmp/pfit
for i in 1 2 3; do
  for b in before after; do
    echo "== cpu $b run $i $(date -u +%H:%M:%S)"
    ./bench-pools-$b --place cpu > runs/cpu-$b-$i.txt 2>&1
  done
done
for i in 1; do
  for b in before after; do
    echo "== wgpu $b run $i $(date -u +%H:%M:%S)"
    timeout 100 ./bench-pools-$b --place wgpu:0 > runs/wgpu-$b-$i.txt 2>&1
  done
done
echo done $(date -u +%H:%M:%S)
