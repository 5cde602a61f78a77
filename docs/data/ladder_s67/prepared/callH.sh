#!/usr/bin/env bash
# Session 67's call H, carry [".gpuS67"] (build_H.sh; and ".gpuZB", ".whl", ".gpuZC" for an H200), in CAP seconds. On
# another card than an H200: the tests below, then LADDER_H1 / H2 (two passes, the second reversed). On an H200: the
# tests, the ladder's append lines on the whole card (at most 120 s), then session 66's call ZC in what is left
# (ladder_s66/prepared/callZC.sh: call ZB's H200 part, the own-bytes bounds of the open decode targets first).
# - h5's GPU tests (the append tests, every variant and kind, the sanitizer matrix run plainly with its fp32 append
#   Qr = 16 shape) and memcheck of the fp32 append test;
# - rung h5 (build_H.sh) against the tree and rung a5, fp32 append Qr = 8, 12, 16 at H = 48, 96 x B = 64, 256, on 88 SMs (a green
#   context: the H200's DRAM bandwidth per SM) and on all 132;
# - session 66's call ZE: decode and per_token / record / fused q = 4 at H = 32, 96 x B = 64, 256 on 88 SMs beside the
#   whole card (whether 88 SMs give the H200's ratios for the verify kinds too).
set -uo pipefail
P=docs/data/ladder_s67/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
B=/tmp/s67 && mkdir -p $B /tmp/o/H && tar xJf .gpuS67/binH.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
L1=$P/LADDER_H1.txt L2=$P/LADDER_H2.txt
H200=0; [[ $GPU == *H200* ]] && H200=1
if ((H200)); then  # the append lines on the whole card only
  grep -- '--mode append' $L1 | grep -v -- '--sms' > /tmp/o/H/L1.txt; L1=/tmp/o/H/L1.txt
  grep -- '--mode append' $L2 | grep -v -- '--sms' > /tmp/o/H/L2.txt; L2=/tmp/o/H/L2.txt
fi
echo "$GPU" > "$OUT/gpu.txt"
# h5's GPU tests: the append tests (fp32 append at six and at five CTAs per SM, SPEC §8's identities), every variant and
# kind; the fp32 append test at six and five CTAs per SM under memcheck
F='CudaVsCpu.*Append*:CudaVsCpu.EveryVariantEveryStepKind:CudaVsCpu.SharedGateEveryStepKind'
timeout ${TESTS_S:-240} $B/bin/kda_cuda_tests --gtest_filter="$F" > "$OUT/tests_h5.txt" 2>&1; echo "tests rc $?"
timeout ${MATRIX_S:-120} $B/bin/kda_tests --gtest_filter='SanitizerMatrix.*' > "$OUT/matrix_h5.txt" 2>&1; echo "matrix rc $?"
timeout ${MEMCHECK_S:-100} compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/kda_cuda_tests \
  --gtest_filter='CudaVsCpu.Fp32AppendSixCtasPerSmWide' > "$OUT/memcheck_h5.txt" 2>&1; echo "memcheck rc $?"
grep -hE "^\[  (PASSED|FAILED) |ERROR SUMMARY" "$OUT"/tests_h5.txt "$OUT"/matrix_h5.txt "$OUT"/memcheck_h5.txt | head
left=$((${CAP:-300} - SECONDS)); ((H200)) && left=$((left < 120 ? left : 120))
OUT=/tmp/o/H BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/H/log.txt 2>&1
cp /tmp/o/H/ladder_summary.txt "$OUT/sum_H.txt"
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/sum_H.txt"
# an H200: session 66's call ZC (call ZB's H200 part, then f16a / a4) in what the cap leaves
if ((H200)); then
  left=$((${CAP:-300} - SECONDS))
  ((left > 60)) && CAP_ZB=$((left - 10)) CAP_H200=$((left - 10)) bash docs/data/ladder_s66/prepared/callZC.sh
fi
