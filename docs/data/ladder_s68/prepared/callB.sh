#!/usr/bin/env bash
# Session 68's call B, carry [".gpuS68", ".gpuZD"] (and ".gpuZB", ".whl", ".gpuZC" for an H200): rungs p1, p2, p3 (build_B.sh) against the tree, fp32 append Qr = 8 at
# H = 48, 96 x B = 64, 256 on 88 SMs (the H200 proxy) and on all 132, two passes in both orders; then session 66's call
# ZF (ncu of the same step on 88 and 132 SMs, the SASS tables) in what CAP leaves. On an H200: the lines on the whole
# card with decode beside, then session 66's call ZC.
set -uo pipefail
P=docs/data/ladder_s68/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s68 && mkdir -p $B /tmp/o/B && tar xJf .gpuS68/binB.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
tar xJf .gpuS68/binT.tar.xz -C $B  # rung p15's GPU test (build_B.sh's footnote): the append tests
timeout ${TESTS_S:-60} $B/bin/kda_cuda_tests_p15 --gtest_filter='CudaVsCpu.*Append*' > "$OUT/tests_p15.txt" 2>&1
echo "tests p15 rc $?"; grep -E "^\[  (PASSED|FAILED) " "$OUT/tests_p15.txt"
L1=$P/LADDER_B1.txt L2=$P/LADDER_B2.txt
if [[ $GPU == *H200* ]]; then  # the whole card only, with decode beside (the target is append / decode in one run)
  D="tree --mode decode --gate auto --variant auto --state f32 --layout sd --peer docs/data/vllm_k3_decode_h200.csv --H 48,96 --B 64,256"
  { grep -v -- '--sms' $P/LADDER_B1.txt; echo "$D"; } > /tmp/o/B/L1.txt; tac /tmp/o/B/L1.txt > /tmp/o/B/L2.txt
  L1=/tmp/o/B/L1.txt L2=/tmp/o/B/L2.txt
fi
OUT=/tmp/o/B BIN=$B/bin timeout ${LADDER_S:-240} benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/B/log.txt 2>&1
cp /tmp/o/B/ladder_summary.txt "$OUT/sum_B.txt"; cp /tmp/o/B/ladder.tgz "$OUT/ladder_B.tgz"
cat "$OUT/sum_B.txt"
left=$((${CAP:-580} - SECONDS))
if [[ $GPU == *H200* ]]; then  # session 66's call ZC: call ZB's H200 part (the open decode targets' own-bytes bounds first)
  ((left > 90)) && CAP_ZB=$((left - 10)) CAP_H200=$((left - 10)) bash docs/data/ladder_s66/prepared/callZC.sh > "$OUT/zf.txt" 2>&1
else
  ((left > 90)) && CAP=$((left - 5)) bash docs/data/ladder_s66/prepared/callZF.sh > "$OUT/zf.txt" 2>&1
fi
tail -5 "$OUT/zf.txt" 2>/dev/null
