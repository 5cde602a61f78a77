#!/usr/bin/env bash
# Session 70's call F, carry [".gpuS70", ".gpuS69", ".kdawhl"] (build_F.sh; for call B ladder_s69's build_B.sh and the
# wheel), in CAP seconds (default 560).
# 1. Rung fd's GPU tests on tree, fd2, fd4 (the append tests, the fused fold, the error flags; memcheck of the append
#    identities on fd4); the recording kinds' error test on the two planted bugs (each must fail).
# 2. LADDER_F1 / F2 (two passes, the second reversed): fd2, fd4 against the tree, fp32 append Qr = 8, 12, 16 on 88 SMs
#    (the H200 proxy) and Qr = 8, 16 on the whole card, H = 48, 96 x B = 64, 256, decode and fused q = 1 beside, in at
#    most CAP_F seconds (default 250); on an H200 the whole card's lines only (at most 150 s), then the tree's targets
#    grid (ladder_s63 LADDER_T, at most 200 s).
# 3. Off an H200, session 69's call B (the checks owed on the tree) in what is left.
set -uo pipefail
CAP=${CAP:-560}
P=docs/data/ladder_s70/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s70f && mkdir -p $B /tmp/o/F && tar xJf .gpuS70/binF.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
F='CudaVsCpu.*Append*:CudaVsCpu.FusedFoldsUpToQrPendingRecords:CudaVsCpu.ErrorFlagsOnDevice*'
for n in tree fd2 fd4; do
  timeout ${TESTS_S:-90} $B/bin/kda_cuda_tests_$n --gtest_filter="$F" > "$OUT/tests_$n.txt" 2>&1 &
done
wait
timeout ${MEMCHECK_S:-60} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/kda_cuda_tests_fd4 \
  --gtest_filter='CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.Fp32AppendSixCtasPerSmWide' \
  > "$OUT/memcheck_fd4.txt" 2>&1
for n in tree fd2 fd4; do echo "tests $n: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests_$n.txt" | tr '\n' ' ')"; done
echo "memcheck fd4: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_fd4.txt") $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/memcheck_fd4.txt" | tr '\n' ' ')"
for n in pl1 pl2; do  # planted bugs: the error test must fail on each
  timeout 60 $B/bin/kda_cuda_tests_$n --gtest_filter='CudaVsCpu.ErrorFlagsOnDeviceRecordingKinds' > "$OUT/plant_$n.txt" 2>&1
  echo "planted $n (must fail): $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/plant_$n.txt" | tr '\n' ' ') $(grep -m2 -E 'Failure|Expected|Which is' "$OUT/plant_$n.txt" | tr '\n' ' ' | cut -c1-200)"
done
echo "tests done at ${SECONDS} s"
L1=$P/LADDER_F1.txt L2=$P/LADDER_F2.txt
H200=0; [[ $GPU == *H200* ]] && H200=1
CAP_F=${CAP_F:-250}
if ((H200)); then
  grep -v -- '--sms' $P/LADDER_F1.txt > /tmp/o/F/L1.txt; tac /tmp/o/F/L1.txt > /tmp/o/F/L2.txt
  L1=/tmp/o/F/L1.txt L2=/tmp/o/F/L2.txt CAP_F=150
fi
OUT=/tmp/o/F BIN=$B/bin timeout $CAP_F benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/F/log.txt 2>&1
cp /tmp/o/F/ladder_summary.txt "$OUT/sum_F.txt"; cp /tmp/o/F/ladder.tgz "$OUT/ladder_F.tgz"
echo "ladder F done at ${SECONDS} s"
left=$((CAP - SECONDS))
if ((H200)); then
  mkdir -p /tmp/o/T; left=$((left < 200 ? left : 200))
  OUT=/tmp/o/T BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh docs/data/ladder_s63/prepared/LADDER_T.txt \
    > /tmp/o/T/log.txt 2>&1
  cp /tmp/o/T/ladder_summary.txt "$OUT/sum_T.txt"; cp /tmp/o/T/ladder.tgz "$OUT/ladder_T.tgz"
  echo "targets grid done at ${SECONDS} s"
elif ((left > 120)); then
  echo "call B at ${SECONDS} s, ${left} s left"
  TESTS_S=$(( (left - 20) * 3 / 5 )) CAP=$((left - 10)) bash docs/data/ladder_s69/prepared/callB.sh > "$OUT/callB.txt" 2>&1
  tail -12 "$OUT/callB.txt"
fi
cat "$OUT/sum_F.txt"
