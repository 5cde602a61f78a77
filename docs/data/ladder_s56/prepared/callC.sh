#!/usr/bin/env bash
# Call C (any H100 / H200): the narrow form (bf16 decode on 128-thread CTAs, 8 / 10 / 12 per SM) — n10's and n12's
# GPU tests (the six-CTA bf16 test, which now lays out the narrow form, and the others that reach it) and the
# sanitizers on n10 — then bf16 decode against the tree (base) at 768–24,576 items, gate modes auto and 2, two
# passes in both orders (LADDER_C1, C2).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuC/binC.tar.xz -C /tmp/b
B=/tmp/b/bin D=docs/data/ladder_s56/prepared
F='CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.GraphCaptureAndReplay:CudaVsCpu.ErrorFlagsOnDevice'
for n in n10 n12; do
  timeout 200 $B/kda_cuda_tests_$n --gtest_filter="$F" > "$OUT/tests_$n.txt" 2>&1; echo "tests $n rc $?"
  grep -E "Failure|FAILED|PASSED|Expected|Which is|configurations" "$OUT/tests_$n.txt" | head -12
done
for tool in racecheck memcheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/kda_cuda_tests_n10 \
    --gtest_filter=CudaVsCpu.Bf16SixCtasPerSmWide > "$OUT/san_$tool.txt" 2>&1; echo "$tool rc $?"
  tail -1 "$OUT/san_$tool.txt"
done
BIN=$B benchmarks/ladder/ladder_passes.sh $D/LADDER_C1.txt $D/LADDER_C2.txt
cat "$OUT/ladder_summary.txt"
