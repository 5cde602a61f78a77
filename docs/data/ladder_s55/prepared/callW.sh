#!/usr/bin/env bash
# Call W (for an H200): the decode bounds at the step's own bytes (`rows_prepared --io`: rowsio, rowsio/1, moveio,
# with move and rows) beside kda_bench in gate mode 2 (and `auto` from 6144 items) at the 13 decode points whose
# targets the H200 does not meet (1536–3072 items: <= 0.90 x vLLM; 6144–24,576: <= 1.05 / 1.08 x floor), two passes
# in both orders (LADDER_W1.txt, W2) through benchmarks/ladder/ladder_passes.sh, which writes bounds_verdict.txt.
# Binaries: .gpuW (build_W.sh). On an H100 it ends at once (vLLM's figures are the H200's).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
[[ $GPU == *H200* ]] || { echo "not an H200: nothing to run"; exit 0; }
mkdir -p /tmp/b && tar xJf .gpuW/binW.tar.xz -C /tmp/b
D=docs/data/ladder_s55/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_W1.txt $D/LADDER_W2.txt
cat "$OUT/bounds_verdict.txt" "$OUT/ladder_summary.txt"
