#!/usr/bin/env bash
# Call H (session 48): on an H200, the targets' grid (LADDER12) and Split against Wide at small grids (LADDER_G);
# on any other card only the latter (session 47 ran the grid on the H100).
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu11/bin11.tar.xz -C /tmp/b
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
L="$(cat .gpu12/LADDER_G.txt)"
case "$GPU" in *H200*) L="$(cat .gpu12/LADDER12.txt)"$'\n'"$L"$'\n'"$(cat .gpu12/LADDER_F.txt)";; esac
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$L" scripts/gpu_run.sh 2>&1 | tail -120
