#!/usr/bin/env bash
# Call X: rung c3s4 (heuristics::step_all_chunks: fp32 decode without the F_B slice keeps every chunk of its item in
# flight at three CTAs per SM from 6144 CTAs, where the plan keeps three stages at four; rows_prepared's rowsio/1 ran
# 0.4–0.9% under rowsio there on the H200, ladder_s55/run4). 1. its GPU tests with the layout from 265 CTAs
# (c3s4t; DecodeThreeStateStagesOnASpreadGrid's stage count is expected to differ: 4, not 3); 2. on an H200 only,
# c3s4 against the tree at 6144–24,576 items in gate modes 2 and `auto`, two passes in both orders (LADDER_X1.txt,
# X2), and c3s4m (the same from 3072 CTAs) at 3072 items. Binaries: .gpuX (build_X.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuX/binX.tar.xz -C /tmp/b
F="CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.EveryVariantEveryStepKind"
F="$F:CudaVsCpu.SharedGateEveryStepKind:CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.BitwiseDeterministicPerVariant"
F="$F:CudaVsCpu.GraphCaptureAndReplay:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant"
if [[ ${X_TESTS:-1} == 1 ]]; then  # (X_TESTS=0 skips them: about 190 s)
  timeout 300 /tmp/b/bin/kda_cuda_tests_c3s4t --gtest_filter="$F" > "$OUT/tests_c3s4t.txt" 2>&1
  echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[       OK|tests ran|Which is|ring_stages" "$OUT/tests_c3s4t.txt" | head -30
fi
[[ $GPU == *H200* ]] || { echo "not an H200: no timing"; exit 0; }
D=docs/data/ladder_s55/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_X1.txt $D/LADDER_X2.txt
cat "$OUT/ladder_summary.txt"
