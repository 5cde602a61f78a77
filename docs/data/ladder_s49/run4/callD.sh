#!/usr/bin/env bash
# Call D (session 49): the sanitizer matrix under synccheck and initcheck on the final tree (any card); on an
# H200 also the targets' grid (LADDER_T: decode in gate modes 2 and `auto` against vLLM, one request at every H,
# bf16 from 1536 items, append Qr = 8 / 16, record / fused / per_token q = 4 at H = 96).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpuC/binC.tar.xz -C /tmp/b
S="sanitizer"
case "$GPU" in *H200*) S="ladder sanitizer";; esac
BIN=/tmp/b/bin OUT=$OUT STAGES="$S" SANITIZER_SETS=matrix SANITIZER_TOOLS="synccheck initcheck" \
  LADDER="$(cat docs/data/ladder_s49/run4/LADDER_T.txt)" scripts/gpu_run.sh 2>&1 | tail -70
