#!/usr/bin/env bash
# Call L (session 48): bin13 (the tree with the new auto tables): the CUDA tests of the auto picks and of every variant
# and step kind; on an H200 also the tables' edges of call K (docs/data/ladder_s48/run3/LADDER_K.txt).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpu13/bin13.tar.xz -C /tmp/b
timeout 300 /tmp/b/bin/kda_cuda_tests --gtest_filter='CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.EveryVariantEveryStepKind:CudaVsCpu.NoOutputNormEveryVariantEveryStepKind:CudaVsCpu.SharedGateEveryStepKind:CudaVsCpu.Bf16SplitTwoOneChunk' 2>&1 | tee $OUT/cuda_tests.log | grep -E "OK \]|FAILED|PASSED|configurations" | head -20
case "$GPU" in *H200*) BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$(cat .gpu13/LADDER_K.txt)" scripts/gpu_run.sh 2>&1 | tail -3;; esac
