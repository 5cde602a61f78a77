#!/usr/bin/env bash
# Call ZF (prepared in session 66): carry [".gpuZD"]. Where fp32 append's time goes when its SMs carry the H200's bytes:
# ncu of one append Qr = 8 step at H = 96, B = 256 (`auto`: gate mode 1, the six-CTA kernel) on a green context of 88
# SMs (kda_bench --sms 88, which reproduces the H200's append, ladder_s66/run3) and on the whole H100, each with the SASS
# stall table (ncu-0: 88 SMs, ncu-1: 132; benchmarks/ladder/sass_blocks.py reads the tables here). The launch is the
# ninth step kernel (NCU_SKIP 8), as ladder_s47/run1's profile of the same step on the whole H100.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/zd && mkdir -p $B && tar xJf .gpuZD/binZD.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
A="--H 96 --B 256 --mode append --qr 8 --gate auto --layout sd --state f32 --variant auto"
OUT=$OUT BIN=$B/bin STAGES=ncu NCU_BIN=kda_bench_tree NCU_KERNEL=kda_step NCU_ARGS="$A --sms 88;$A" \
  timeout ${CAP:-400} scripts/gpu_run.sh 2>&1 | tail -40
