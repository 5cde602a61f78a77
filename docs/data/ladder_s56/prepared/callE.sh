#!/usr/bin/env bash
# Call E (any H100 / H200): the narrow form (tree) against the tree before it (head), each with the q = 1 kernels'
# conv as one if / else if (the tree) or two tests (ifif, tifif): bf16 decode at 768–24,576 items in gate modes auto
# and 2, fp32 decode (mode 2) and append Qr = 8 (bf16, fp32) — two passes in both orders (LADDER_E1, E2).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuE/binE.tar.xz -C /tmp/b
D=docs/data/ladder_s56/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_E1.txt $D/LADDER_E2.txt
cat "$OUT/ladder_summary.txt"
