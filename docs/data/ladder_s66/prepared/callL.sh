#!/usr/bin/env bash
# Calls ZE and ZG (prepared in session 66), carry [".gpuZD"] (build_ZD.sh): X=E or X=G runs LADDER_X1 / X2 (two passes,
# the second reversed) with .gpuZD's binaries in CAP seconds, the summary as sum_X.txt (and bounds_verdict.txt where the
# ladder has rows_prepared runs).
# - X=E (CAP=120): the verify kinds on 88 SMs (kda_bench --sms 88) beside the whole card: decode and per_token / record /
#   fused q = 4 at H = 32, 96 x B = 64, 256, `auto`: whether 88 SMs of an H100 give the H200's ratios for the verify kinds
#   too (on the H200 per_token 1.19-1.22 x its floor, record 0.78-0.80 x decode, fused 1.25-1.28 x decode; on an H100
#   per_token 1.11 x).
# - X=G (CAP=360): the append target's bound on 88 SMs: rows_prepared --append (arows/8, arows4/8: an append cycle's row
#   loop with its prologue free, checked against the CPU reference) beside kda_bench's fp32 decode and append Qr = 8
#   (`auto`) at H = 96, B = 256 / 64 and H = 48, B = 256 (bounds_verdict.txt: append Qr = 8 <= 0.65 x decode against its
#   bound; above it on 88 SMs, the target is out of reach on the proxy, not yet on the H200, where session 43 measured
#   arows4/8 at 1.00-1.05 x the floor with the step at 1.17-1.22). Then rung a5 (fp32 append at five CTAs per SM on its
#   kernel compiled for five, 48 registers) against the tree, append Qr = 8, 16 at H = 48, 96 x B = 64, 256, on 88 SMs
#   (a588 / tree88) and on the whole card (a5 / tree).
set -uo pipefail
: "${X:?X: E or G}"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/zd && mkdir -p $B /tmp/o/$X && tar xJf .gpuZD/binZD.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
P=docs/data/ladder_s66/prepared
OUT=/tmp/o/$X BIN=$B/bin timeout ${CAP:-300} benchmarks/ladder/ladder_passes.sh $P/LADDER_${X}1.txt $P/LADDER_${X}2.txt \
  > /tmp/o/$X/log.txt 2>&1
cp /tmp/o/$X/ladder_summary.txt "$OUT/sum_$X.txt"; cp /tmp/o/$X/bounds_verdict.txt "$OUT/" 2>/dev/null
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/bounds_verdict.txt" "$OUT/sum_$X.txt" 2>/dev/null
