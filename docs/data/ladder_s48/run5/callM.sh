#!/usr/bin/env bash
# Call M (session 48): on an H200 only, the tables' edges of call K with bin13 (LADDER_K: fp32 decode Split 2 at
# 144-200 items in gate modes 2 and auto, H = 24, B = 8 against vLLM; bf16 decode at 96-144; record / fused q = 2, 3).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
case "$GPU" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0;; esac
mkdir -p /tmp/b && tar xJf .gpu13/bin13.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$(cat .gpu13/LADDER_K.txt)" scripts/gpu_run.sh 2>&1 | tail -3
