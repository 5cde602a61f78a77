#!/usr/bin/env bash
# Session 68's call W (prepared, not run), carry [".gpuS68"] (build_W.sh): rung wpf (the first wave's window lines and x
# prefetched once the item's slot is known: w1 into L1, w2 into L2) against the tree, fp32 append Qr = 8 and 16 at
# H = 48, 96 x B = 64, 256 on 88 SMs (the H200 proxy) and on the whole card, with decode beside, two passes in both
# orders; first the append GPU tests on both rungs (the six- and five-CTA kernels compiled with the prefetch). On an
# H200 the lines without --sms only.
set -uo pipefail
P=docs/data/ladder_s68/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s68w && mkdir -p $B /tmp/o/W && tar xJf .gpuS68/binW.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
for n in w1 w2; do
  timeout ${TESTS_S:-60} $B/bin/kda_cuda_tests_$n --gtest_filter='CudaVsCpu.*Append*' > "$OUT/tests_$n.txt" 2>&1
  echo "tests $n rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests_$n.txt" | tr '\n' ' ')"
done
L1=$P/LADDER_W1.txt L2=$P/LADDER_W2.txt
if [[ $GPU == *H200* ]]; then
  grep -v -- '--sms' $P/LADDER_W1.txt > /tmp/o/W/L1.txt; tac /tmp/o/W/L1.txt > /tmp/o/W/L2.txt
  L1=/tmp/o/W/L1.txt L2=/tmp/o/W/L2.txt
fi
OUT=/tmp/o/W BIN=$B/bin timeout ${LADDER_S:-360} benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/W/log.txt 2>&1
cp /tmp/o/W/ladder_summary.txt "$OUT/sum_W.txt"; cp /tmp/o/W/ladder.tgz "$OUT/ladder_W.tgz"
cat "$OUT/sum_W.txt"
