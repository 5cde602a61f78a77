#!/usr/bin/env bash
# Call B (session 49): rung `pv2` (run 1's `pv` with the warps' wait for the scaled vectors moved to their
# first chunk, after its rows are loaded) against the tree (`base`): the tests of the six-CTA kernels and
# the new tables' edges, then LADDER_PV2 (bf16 decode in gate modes `auto` and 2 at 1536-24,576 items,
# fp32 and bf16 append Qr = 8; two passes, both orders).
# Binaries: .gpuR/pack/binB.tar.xz (kda_bench_base, kda_bench_pv2, kda_cuda_tests = pv2's).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpuR/pack/binB.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT STAGES="cuda ladder" GTEST_SHARDS=2 \
  CUDA_FILTER="CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.AutoVariantAtTheTablesEdges" \
  LADDER="$(cat docs/data/ladder_s49/run2/LADDER_PV2.txt)" scripts/gpu_run.sh 2>&1 | tail -40
