#!/usr/bin/env bash
# Call P (session 60; any card): rung pn, the persistent narrow form (KDA_STEP_NARROW_PERSISTENT=1: the narrow kernel's
# CTAs loop over the items of their head, the next item's first state chunks issued into the stages the current item's
# last chunks free), against the tree, both with --narrow on so that any card runs the narrow form: the narrow-form GPU
# tests of both (the tests of this tree: reps beyond two and three waves of eight CTAs per SM), then LADDER_P1 / P2
# (bf16 decode, two passes, the second reversed; `six`: the tree's six-CTA form) in the seconds CAP leaves (default 300).
# Carry [".gpuP"] (kda_bench_tree, kda_bench_pn, kda_bench_pn7, kda_cuda_tests_tree, kda_cuda_tests_pn; build_P.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuP/binP.tar.xz -C /tmp/b && ln -sf kda_bench_tree /tmp/b/bin/kda_bench_six
D=docs/data/ladder_s60/prepared
for n in pn tree; do
  timeout 150 /tmp/b/bin/kda_cuda_tests_$n --gtest_filter='CudaVsCpu.*Narrow*' --gtest_brief=1 > "$OUT/tests_$n.txt" 2>&1
  echo "tests $n: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_$n.txt" | tr '\n' ' ')"
done
left=$((${CAP:-300} - SECONDS))
((left > 40)) && BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh $D/LADDER_P1.txt $D/LADDER_P2.txt
cat "$OUT/ladder_summary.txt" 2>/dev/null
