#!/usr/bin/env bash
# Call N (prepared in session 53, not run): 1. on an H200, the tree (kConvWeightsBeforeWait, kFirstStagesAfterWindow)
# against session 52's tree (`s52`) at the points the H100 did not settle — fp32 gate mode 2 at 384 items, where it
# lost 2.0-2.2% there — and rung `ew` (rung_ew.diff: thread 0 waits, resolves and issues the first stages right after
# its barrier init, before the CTA's barrier, the trigger and the weight loads), two passes in both orders
# (LADDER_N1.txt, LADDER_N2.txt); 2. the q = 1 GPU tests on `ew`; 3. the timeline of the tree (`tltree`) and of `ew`
# (`ewtl`) at 1536 and 3072 items with the dumps kept (xz) for a per-SM reading of the turnovers. Binaries: .gpuN
# (build_N.sh). About 4 minutes.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuN/binN.tar.xz -C /tmp/b
D=docs/data/ladder_s53/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_N1.txt $D/LADDER_N2.txt
F='CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.GraphCaptureAndReplay:CudaVsCpu.SharedGateStepsAfterASlowProducer'
timeout 100 /tmp/b/bin/kda_cuda_tests_ew --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests_ew.txt" 2>&1; echo "kda_cuda_tests_ew rc=$?"; tail -3 "$OUT/tests_ew.txt"
export PYTHONDONTWRITEBYTECODE=1
mkdir -p /tmp/tl "$OUT/dumps"
while read -r tag args; do
  for bin in kda_bench_tltree kda_bench_ewtl; do
    /tmp/b/bin/$bin $args --variant auto --layout sd --dump-out /tmp/tl/${bin#kda_bench_}_$tag > /dev/null 2>&1
  done
done <<'PTS'
g2 --H 12 --B 128 --mode decode --gate 2 --state f32
g2 --H 96 --B 32 --mode decode --gate 2 --state f32
PTS
for f in /tmp/tl/*.bin; do python3 benchmarks/ladder/timeline.py "$f"; done > "$OUT/timeline.txt" 2>&1
tar cJf "$OUT/dumps.tar.xz" -C /tmp/tl .
grep -E "^/tmp|period|drain \(|turnover|resident at release|launched later" "$OUT/timeline.txt"
echo "--- ladder"; tail -30 "$OUT/ladder_summary.txt"
