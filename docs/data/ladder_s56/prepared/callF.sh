#!/usr/bin/env bash
# Call F (any H100 / H200): the tree with Policy::narrow — its GPU tests (the narrow form asked for by the policy on
# any card, the equality of the two forms, the q = 1 kernels beside them), the sanitizer matrix on the GPU and the
# four sanitizers on the narrow form's tests; then bf16 decode with --narrow off / on and ifif (the six-CTA kernel
# with the conv as two tests, narrow off) at 768–24,576 items, gate modes auto and 2, two passes in both orders.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuF/binF.tar.xz -C /tmp/b
B=/tmp/b/bin D=docs/data/ladder_s56/prepared
F='CudaVsCpu.Bf16Narrow*:CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.GraphCaptureAndReplay:CudaVsCpu.ErrorFlagsOnDevice:CudaVsCpu.Q1KernelPerGateMode'
timeout 200 $B/kda_cuda_tests --gtest_filter="$F" > "$OUT/tests_cuda.txt" 2>&1; echo "cuda tests rc $?"
grep -E "^\[  (PASSED|FAILED) |Failure|narrow form" "$OUT/tests_cuda.txt" | head -12
timeout 150 $B/kda_tests --gtest_filter='SanitizerMatrix.*' > "$OUT/tests_matrix.txt" 2>&1; echo "matrix rc $?"
grep -E "sanitizer-matrix|^\[  (PASSED|FAILED) " "$OUT/tests_matrix.txt" | head -4
for tool in racecheck memcheck synccheck initcheck; do
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 9 $B/kda_cuda_tests \
    --gtest_filter='CudaVsCpu.Bf16NarrowFormEqualsSixCtaForm' > "$OUT/san_$tool.txt" 2>&1; echo "$tool rc $?"
  tail -1 "$OUT/san_$tool.txt"
done
BIN=$B benchmarks/ladder/ladder_passes.sh $D/LADDER_F1.txt $D/LADDER_F2.txt
cat "$OUT/ladder_summary.txt"
