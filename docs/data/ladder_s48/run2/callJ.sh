#!/usr/bin/env bash
# Call J (session 48): the tree with the new auto tables (bin13: kda_cuda_tests, kda_tests, kda_bench built from it):
# the CUDA tests of the auto picks at the tables' edges and of the kernels they pick there, then the ladder of call I
# (Split 2 against Wide and auto where Wide holds one to two items per SM; record / fused q = 2-4 in gate mode 2).
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu13/bin13.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
/tmp/b/bin/kda_tests --gtest_filter='Plan.*' 2>&1 | tail -1
timeout 240 /tmp/b/bin/kda_cuda_tests --gtest_filter='CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.Bf16SplitTwoOneChunk:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.SplitSharedGateEveryClusterSize:CudaVsCpu.EveryVariantEveryStepKind' 2>&1 | grep -E "^\[ (  OK|FAILED|  PASSED)|configurations|Failure|Expected|Which|plan" | head -40
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$(cat .gpu13/LADDER_I.txt)" scripts/gpu_run.sh 2>&1 | tail -3
