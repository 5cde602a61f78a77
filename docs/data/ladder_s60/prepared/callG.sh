#!/usr/bin/env bash
# Call G (prepared in session 60, not yet run; H200 figures wanted, any card runs it): rung f16 (Wide fp32 q = 1 in
# 16-row chunks, the same bytes in flight) and f16s3 / f16s2 (24 / 16 KiB in flight a CTA) against the tree: f16's
# GPU tests of the fp32 q = 1 forms, then LADDER_G1 / G2 (fp32 decode in gate mode 2 and `auto`, append Qr = 8; two
# passes, the second reversed) in the seconds CAP leaves (default 330). Carry [".gpuG"] (build_G.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuG/binG.tar.xz -C /tmp/b
D=docs/data/ladder_s60/prepared
# (DecodeThreeStateStagesOnASpreadGrid asserts three 16 KiB stages on a spread grid: f16's plan takes more, smaller
# ones, so its stage-count check fails by design; its values are checked all the same)
F='CudaVsCpu.EveryVariantEveryStepKind:CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.SharedGateEveryStepKind'
F+=':CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.AppendQr16LargeGridEqualsDecode'
F+=':CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.FusedFoldsUpToQrPendingRecords'
timeout 200 /tmp/b/bin/kda_cuda_tests_f16 --gtest_filter="$F" --gtest_brief=1 > "$OUT/tests_f16.txt" 2>&1
echo "tests f16: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_f16.txt" | tr '\n' ' ')"
left=$((${CAP:-330} - SECONDS))
((left > 40)) && BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh $D/LADDER_G1.txt $D/LADDER_G2.txt
cat "$OUT/ladder_summary.txt" 2>/dev/null
