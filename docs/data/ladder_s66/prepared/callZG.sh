#!/usr/bin/env bash
# Call ZG (prepared in session 66): carry [".gpuZD"]. The append target's bound where an H100 carries the H200's bytes
# per SM: rows_prepared --append (arows/8, arows4/8: an append cycle's row loop with its prologue free, the fold and
# the token per row, checked against the CPU reference) beside kda_bench's fp32 decode and append Qr = 8 (`auto`), all on
# a green context of 88 SMs (--sms 88, which reproduces the H200's append: ladder_s66/run3), at H = 96, B = 256 / 64 and
# H = 48, B = 256; two passes in both orders (LADDER_G1 / G2), bounds_verdict.txt: append Qr = 8 <= 0.65 x decode
# against its bound there. A bound above the target on 88 SMs says the target is out of reach on the proxy, not yet on
# the H200 (where session 43 measured arows4/8 at 1.00-1.05 x the floor with the step at 1.17-1.22). Then rung a5
# (build_ZD.sh: fp32 append at five CTAs per SM on its kernel compiled for five, 48 registers) against the tree, append
# Qr = 8, 16 at H = 48, 96 x B = 64, 256, on 88 SMs (a588 / tree88) and on the whole card (a5 / tree).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/zd && mkdir -p $B /tmp/o/G && tar xJf .gpuZD/binZD.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
P=docs/data/ladder_s66/prepared
OUT=/tmp/o/G BIN=$B/bin timeout ${CAP:-360} benchmarks/ladder/ladder_passes.sh $P/LADDER_G1.txt $P/LADDER_G2.txt \
  > /tmp/o/G/log.txt 2>&1
cp /tmp/o/G/ladder_summary.txt "$OUT/sum_G.txt"; cp /tmp/o/G/bounds_verdict.txt "$OUT/" 2>/dev/null
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/bounds_verdict.txt" "$OUT/sum_G.txt" 2>/dev/null
