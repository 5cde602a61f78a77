#!/usr/bin/env bash
# Call A (session 49): rung `pv` (the lean q = 1 kernels' token vectors scaled once by warp 0 and laid out by
# reduction half: the six-CTA bf16 decode / recording kernels and the six-CTA fp32 kernel) against the tree
# (`base`): its GPU tests first, then LADDER_PV (two passes, both orders); then the rule tables of LADDER_P
# (record / fused q = 4-7 at up to 12 items, fp32 decode at 145-155 items) with the tree's binary; ncu of pv's
# bf16 decode step at H = 96, B = 64 (gate mode 2).
# Binaries: .gpuR/pack/binR.tar.xz (kda_bench_base, kda_bench_pv, kda_cuda_tests = pv's).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpuR/pack/binR.tar.xz -C /tmp/b
D=docs/data/ladder_s49/run1
L="$(cat $D/LADDER_PV.txt)"
case "$GPU" in *H200*|*H100*) L="$L"$'\n'"$(cat $D/LADDER_P.txt)";; esac
BIN=/tmp/b/bin OUT=$OUT STAGES="cuda ladder ncu" GTEST_SHARDS=2 NCU_BIN=kda_bench_pv NCU_KERNEL=kda_step \
  NCU_ARGS="--H 96 --B 64 --mode decode --variant auto --gate 2 --state bf16 --layout sd" \
  CUDA_FILTER="CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.AppendQr16LargeGridEqualsDecode:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.EveryVariantEveryStepKind" \
  LADDER="$L" scripts/gpu_run.sh 2>&1 | tail -60
