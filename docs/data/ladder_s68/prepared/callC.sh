#!/usr/bin/env bash
# Session 68's call C, carry [".gpuS68"] (and ".gpuZB", ".whl", ".gpuZC" for an H200): is fp32 append's cycle slow
# because every row of a step is at the same cycle position? kda_bench with --stagger (rows at staggered cycle
# positions: the same bytes per cycle, each step a mix of pending counts) beside the aligned cycle of the protocol,
# Qr = 8 and 16, and decode, at H = 48, 96 x B = 64, 256: on 88 SMs (the H200 proxy) and on the whole card; two passes,
# the second reversed. On an H200, the whole card only, then session 66's call ZC in what CAP leaves.
set -uo pipefail
P=docs/data/ladder_s68/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s68c && mkdir -p $B /tmp/o/C8 && tar xJf .gpuS68/binC.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
L1=$P/LADDER_C1.txt L2=$P/LADDER_C2.txt
if [[ $GPU == *H200* ]]; then
  grep -v -- '--sms' $P/LADDER_C1.txt > /tmp/o/C8/L1.txt; tac /tmp/o/C8/L1.txt > /tmp/o/C8/L2.txt
  L1=/tmp/o/C8/L1.txt L2=/tmp/o/C8/L2.txt
fi
OUT=/tmp/o/C8 BIN=$B/bin timeout ${LADDER_S:-300} benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/C8/log.txt 2>&1
cp /tmp/o/C8/ladder_summary.txt "$OUT/sum_C.txt"; cp /tmp/o/C8/ladder.tgz "$OUT/ladder_C.tgz"
cat "$OUT/sum_C.txt"
left=$((${CAP:-560} - SECONDS))
if [[ $GPU == *H200* ]] && ((left > 90)); then
  CAP_ZB=$((left - 10)) CAP_H200=$((left - 10)) bash docs/data/ladder_s66/prepared/callZC.sh > "$OUT/zc.txt" 2>&1
  tail -30 "$OUT/zc.txt"
fi
