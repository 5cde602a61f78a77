#!/usr/bin/env bash
# Call A (any H100 / H200): the rung sw (the six-CTA bf16 decode kernel's A_log, dt_bias and norm_w staged in
# shared memory before the PDL wait) — its GPU tests (the six-CTA bf16 test, the append = decode identity, every
# variant and kind, graphs, flags) and racecheck / memcheck on the six-CTA test — then bf16 decode against the
# tree's kernel (base) at 768–24,576 items, gate modes auto and 2, two passes in both orders (LADDER_A1, A2).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuA/binA.tar.xz -C /tmp/b
B=/tmp/b/bin D=docs/data/ladder_s56/prepared
F='CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.EveryVariantEveryStepKind:CudaVsCpu.NoOutputNormEveryVariantEveryStepKind:CudaVsCpu.GraphCaptureAndReplay:CudaVsCpu.ErrorFlagsOnDevice:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.Q1KernelPerGateMode'
timeout 240 $B/kda_cuda_tests_sw --gtest_filter="$F" > "$OUT/tests_sw.txt" 2>&1; echo "tests rc $?"
tail -3 "$OUT/tests_sw.txt"
for tool in racecheck memcheck synccheck; do
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 $B/kda_cuda_tests_sw \
    --gtest_filter=CudaVsCpu.Bf16SixCtasPerSmWide > "$OUT/san_$tool.txt" 2>&1; echo "$tool rc $?"
  tail -2 "$OUT/san_$tool.txt"
done
BIN=$B benchmarks/ladder/ladder_passes.sh $D/LADDER_A1.txt $D/LADDER_A2.txt
cat "$OUT/ladder_summary.txt"
