#!/usr/bin/env bash
# Session 69's call A, carry [".gpuS69"] (build_A.sh), in CAP seconds (default 570).
# 1. The rungs' GPU tests: the append tests, the fused fold, and the recording kinds' error flags (a request in error
#    after its slot was read: nothing written, the copy landed) on tree, sbp and sw1; memcheck of the error test on sbp.
# 2. LADDER_A1 / A2 (two passes, the second reversed): sbp, sw1, w1 against the tree, fp32 append Qr = 8 and 16 at
#    H = 48, 96 x B = 64, 256, decode beside; on 88 SMs (the H200 proxy) and on the whole card; on an H200 the whole
#    card only.
# 3. An H200 only: the tree's targets grid (ladder_s63/prepared/LADDER_T.txt, one pass), then the open decode targets
#    beside their own-bytes bounds (ladder_s64/prepared/LADDER_B1.txt, one pass).
set -uo pipefail
CAP=${CAP:-570}
P=docs/data/ladder_s69/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s69 && mkdir -p $B /tmp/o/A && tar xJf .gpuS69/binA.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
F='CudaVsCpu.*Append*:CudaVsCpu.FusedFoldsUpToQrPendingRecords:CudaVsCpu.ErrorFlagsOnDevice*'
for n in tree sbp sw1; do
  timeout ${TESTS_S:-90} $B/bin/kda_cuda_tests_$n --gtest_filter="$F" > "$OUT/tests_$n.txt" 2>&1 &
done
wait
timeout ${MEMCHECK_S:-60} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/kda_cuda_tests_sbp \
  --gtest_filter='CudaVsCpu.ErrorFlagsOnDeviceRecordingKinds' > "$OUT/memcheck_sbp.txt" 2>&1
for n in tree sbp sw1; do echo "tests $n: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests_$n.txt" | tr '\n' ' ')"; done
echo "memcheck sbp: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_sbp.txt") $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/memcheck_sbp.txt" | tr '\n' ' ')"
echo "tests done at ${SECONDS} s"
L1=$P/LADDER_A1.txt L2=$P/LADDER_A2.txt
H200=0; [[ $GPU == *H200* ]] && H200=1
if ((H200)); then
  grep -v -- '--sms' $P/LADDER_A1.txt > /tmp/o/A/L1.txt; tac /tmp/o/A/L1.txt > /tmp/o/A/L2.txt
  L1=/tmp/o/A/L1.txt L2=/tmp/o/A/L2.txt
fi
left=$((CAP - SECONDS)); ((H200)) && left=$((left < 170 ? left : 170))
OUT=/tmp/o/A BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/A/log.txt 2>&1
cp /tmp/o/A/ladder_summary.txt "$OUT/sum_A.txt"; cp /tmp/o/A/ladder.tgz "$OUT/ladder_A.tgz"
echo "ladder A done at ${SECONDS} s"
if ((H200)); then
  mkdir -p /tmp/o/T /tmp/o/B
  left=$((CAP - SECONDS)); left=$((left < 200 ? left : 200))
  OUT=/tmp/o/T BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh docs/data/ladder_s63/prepared/LADDER_T.txt \
    > /tmp/o/T/log.txt 2>&1
  cp /tmp/o/T/ladder_summary.txt "$OUT/sum_T.txt"; cp /tmp/o/T/ladder.tgz "$OUT/ladder_T.tgz"
  echo "targets grid done at ${SECONDS} s"
  left=$((CAP - SECONDS))
  ((left > 40)) && OUT=/tmp/o/B BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh \
    docs/data/ladder_s64/prepared/LADDER_B1.txt > /tmp/o/B/log.txt 2>&1
  cp /tmp/o/B/ladder_summary.txt "$OUT/sum_B.txt" 2>/dev/null; cp /tmp/o/B/bounds_verdict.txt "$OUT/bounds_B.txt" 2>/dev/null
  cp /tmp/o/B/ladder.tgz "$OUT/ladder_B.tgz" 2>/dev/null
fi
cat "$OUT/sum_A.txt"
