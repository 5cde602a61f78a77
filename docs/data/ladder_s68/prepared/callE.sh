#!/usr/bin/env bash
# Session 68's call E, carry [".gpuS68"] (.gpuS68/binD.tar.xz, build_D.sh): ncu of the tree's fp32 append on 88 SMs at
# a high pending count, Qr = 8 at pending 6 (the 25th step launch: cycle position 6 of N = 4 groups) and Qr = 16 at
# pending 12 (the 49th), H = 96, B = 256, with the SASS tables: is a step with many records to fold bound by issue?
# Then call D's rungs again on 88 SMs (q3u4, u4, q3 against the tree at Qr = 12, 16; two passes, the second reversed).
set -uo pipefail
P=docs/data/ladder_s68/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s68e && mkdir -p $B /tmp/o/E && tar xJf .gpuS68/binD.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
for c in "8 24" "16 48"; do
  set -- $c
  A="--H 96 --B 256 --mode append --qr $1 --gate auto --layout sd --state f32 --variant auto --sms 88"
  mkdir -p "$OUT/ncu_qr$1"
  OUT="$OUT/ncu_qr$1" BIN=$B/bin STAGES=ncu NCU_BIN=kda_bench_tree NCU_KERNEL=kda_step NCU_SKIP=$2 NCU_ARGS="$A" \
    timeout 150 scripts/gpu_run.sh 2>&1 | tail -3
  grep -E "Duration|DRAM Throughput|Issued Warp Per Scheduler|No Eligible" "$OUT/ncu_qr$1"/ncu-0.txt 2>/dev/null | head -5
done
OUT=/tmp/o/E BIN=$B/bin timeout ${LADDER_S:-200} benchmarks/ladder/ladder_passes.sh $P/LADDER_E1.txt $P/LADDER_E2.txt > /tmp/o/E/log.txt 2>&1
cp /tmp/o/E/ladder_summary.txt "$OUT/sum_E.txt"; cp /tmp/o/E/ladder.tgz "$OUT/ladder_E.tgz"
cat "$OUT/sum_E.txt"
