#!/usr/bin/env bash
# Session 68's call F, carry [".gpuS68"] (.gpuS68/binF.tar.xz: kda_bench and rows_prepared of the working tree): the
# Qr = 16 target's bound at the step's layout on 88 SMs: rows_prepared --append (arows5/16, amove5/16: the Qr = 16 cycle's
# row loop with its prologue free and its bytes moved alone at five CTAs per SM, beside arows/8 and the rest, checked
# against the CPU reference) beside kda_bench's fp32 decode and append Qr = 8, 16 (`auto`), H = 96, 48 x B = 256; two
# passes, the second reversed.
set -uo pipefail
P=docs/data/ladder_s68/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s68f && mkdir -p $B /tmp/o/F && tar xJf .gpuS68/binF.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
OUT=/tmp/o/F BIN=$B/bin timeout ${LADDER_S:-240} benchmarks/ladder/ladder_passes.sh $P/LADDER_F1.txt $P/LADDER_F2.txt > /tmp/o/F/log.txt 2>&1
cp /tmp/o/F/ladder_summary.txt "$OUT/sum_F.txt"; cp /tmp/o/F/ladder.tgz "$OUT/ladder_F.tgz"; cp /tmp/o/F/bounds_verdict.txt "$OUT/" 2>/dev/null
cat "$OUT/bounds_verdict.txt" "$OUT/sum_F.txt" 2>/dev/null
