#!/usr/bin/env bash
# Call S (session 53, the session's last device seconds): callN.sh's ladder cut to fp32 gate mode 2 at 384, 1536 and
# 3072 items (LADDER_S1.txt, LADDER_S2.txt: the tree, session 52's tree `s52`, rung `ew`), two passes in both orders.
# Binaries: .gpuN (build_N.sh). About a minute.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuN/binN.tar.xz -C /tmp/b bin/kda_bench bin/kda_bench_s52 bin/kda_bench_ew
D=docs/data/ladder_s53/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_S1.txt $D/LADDER_S2.txt
tail -12 "$OUT/ladder_summary.txt"
