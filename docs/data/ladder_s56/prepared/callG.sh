#!/usr/bin/env bash
# Call G (an H200; on another card it ends at once): bf16 decode of the tree (the narrow form by the planner's rule),
# the tree with --narrow off (the six-CTA form), session 55's product (s55) and vf (the narrow form with its v conv
# first; its narrow-form tests first), 768–24,576 items, gate modes auto and 2, two passes in both orders (LADDER_G1,
# G2). Prepared for the next session; no H200 came in this one.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
[[ $GPU == *H200* ]] || exit 0
mkdir -p /tmp/b && tar xJf .gpuG/binG.tar.xz -C /tmp/b
D=docs/data/ladder_s56/prepared
timeout 120 /tmp/b/bin/kda_cuda_tests_vf --gtest_filter='CudaVsCpu.Bf16Narrow*' > "$OUT/tests_vf.txt" 2>&1; echo "vf tests rc $?"
grep -E "^\[  (PASSED|FAILED) |Failure" "$OUT/tests_vf.txt" | head -5
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_G1.txt $D/LADDER_G2.txt
cat "$OUT/ladder_summary.txt"
