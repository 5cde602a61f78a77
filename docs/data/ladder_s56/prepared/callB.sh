#!/usr/bin/env bash
# Call B (any H100 / H200): the six-CTA bf16 decode kernel's first stages issued after the window only in the grid's
# first N waves (w1, w2) or never (w0), against the tree (base: every CTA after its window), bf16 decode at
# 768–24,576 items, gate modes auto and 2, two passes in both orders; w0's six-CTA GPU test and racecheck first.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuB/binB.tar.xz -C /tmp/b
B=/tmp/b/bin D=docs/data/ladder_s56/prepared
timeout 120 $B/kda_cuda_tests_w0 --gtest_filter=CudaVsCpu.Bf16SixCtasPerSmWide > "$OUT/tests_w0.txt" 2>&1; echo "tests rc $?"
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $B/kda_cuda_tests_w0 \
  --gtest_filter=CudaVsCpu.Bf16SixCtasPerSmWide > "$OUT/san_racecheck.txt" 2>&1; echo "racecheck rc $?"
BIN=$B benchmarks/ladder/ladder_passes.sh $D/LADDER_B1.txt $D/LADDER_B2.txt
cat "$OUT/ladder_summary.txt"
