#!/usr/bin/env bash
# Session 66's call ZE: carry [".gpuZD"]. The verify kinds on 88 SMs (kda_bench --sms 88) beside the whole card: decode and
# per_token / record / fused q = 4 at H = 32, 96 x B = 64, 256, `auto`, two passes in both orders (LADDER_E1 / E2,
# sum_E.txt), in CAP seconds (default 120): whether 88 SMs of an H100 give the H200's ratios for the verify kinds too
# (on the H200: per_token 1.19-1.22 x its floor, record 0.78-0.80 x decode, fused 1.25-1.28 x decode; on an H100 per_token
# 1.11 x).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/zd && mkdir -p $B /tmp/o/E && tar xJf .gpuZD/binZD.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
P=docs/data/ladder_s66/prepared
OUT=/tmp/o/E BIN=$B/bin timeout ${CAP:-120} benchmarks/ladder/ladder_passes.sh $P/LADDER_E1.txt $P/LADDER_E2.txt \
  > /tmp/o/E/log.txt 2>&1
cp /tmp/o/E/ladder_summary.txt "$OUT/sum_E.txt"
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/sum_E.txt"
