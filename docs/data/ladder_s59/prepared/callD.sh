#!/usr/bin/env bash
# Call D (session 59): call A's H200 branch alone, bounded by CAP seconds (default 420); on any other card it exits at
# once (the H100 halves of call A ran in session 57 run 1, session 58 run 3 and this session's run 1). Carry [".gpuA"].
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
[[ $GPU == *H200* ]] || { echo "not an H200: nothing run"; exit 0; }
mkdir -p /tmp/b && tar xJf .gpuA/binA.tar.xz -C /tmp/b
D=docs/data/ladder_s57/prepared
for n in nf; do
  timeout 100 /tmp/b/bin/kda_cuda_tests_$n --gtest_filter='CudaVsCpu.*Narrow*' --gtest_brief=1 > "$OUT/tests_$n.txt" 2>&1
  echo "tests $n: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_$n.txt" | tr '\n' ' ')"
done
BIN=/tmp/b/bin timeout $((${CAP:-420} - SECONDS)) benchmarks/ladder/ladder_passes.sh $D/LADDER_A1.txt $D/LADDER_A2.txt
cat "$OUT/ladder_summary.txt"
