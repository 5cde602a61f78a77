#!/usr/bin/env bash
# Call H (prepared in session 60, not yet run; H200 figures wanted, any card runs it): rung l1 (the narrow form's first
# stage with the window, the other two after the staged-inputs barrier) against the tree, both with --narrow on: the
# narrow-form GPU tests of both, then LADDER_H1 / H2 (bf16 decode and per_token, two passes, the second reversed) in
# the seconds CAP leaves (default 300). Carry [".gpuH"] (build_H.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuH/binH.tar.xz -C /tmp/b
D=docs/data/ladder_s60/prepared
for n in tree l1; do
  timeout 100 /tmp/b/bin/kda_cuda_tests_$n --gtest_filter='CudaVsCpu.*Narrow*' --gtest_brief=1 > "$OUT/tests_$n.txt" 2>&1
  echo "tests $n: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_$n.txt" | tr '\n' ' ')"
done
left=$((${CAP:-300} - SECONDS))
((left > 40)) && BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh $D/LADDER_H1.txt $D/LADDER_H2.txt
cat "$OUT/ladder_summary.txt" 2>/dev/null
