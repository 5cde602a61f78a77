#!/usr/bin/env bash
# Session 68's call D, carry [".gpuS68"]: rungs q3, u4, q3u4 (build_D.sh; the five-CTA fp32 q = 1 kernel) against the
# tree, fp32 append Qr = 12, 16 at H = 48, 96 x B = 64, 256 on 88 SMs and (tree, q3u4) on 132; two passes, the second
# reversed. On an H200 the lines without --sms only.
set -uo pipefail
P=docs/data/ladder_s68/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s68d && mkdir -p $B /tmp/o/D && tar xJf .gpuS68/binD.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
L1=$P/LADDER_D1.txt L2=$P/LADDER_D2.txt
if [[ $GPU == *H200* ]]; then
  grep -v -- '--sms' $P/LADDER_D1.txt > /tmp/o/D/L1.txt; tac /tmp/o/D/L1.txt > /tmp/o/D/L2.txt
  L1=/tmp/o/D/L1.txt L2=/tmp/o/D/L2.txt
fi
OUT=/tmp/o/D BIN=$B/bin timeout ${LADDER_S:-300} benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/D/log.txt 2>&1
cp /tmp/o/D/ladder_summary.txt "$OUT/sum_D.txt"; cp /tmp/o/D/ladder.tgz "$OUT/ladder_D.tgz"
cat "$OUT/sum_D.txt"
