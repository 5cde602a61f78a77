#!/usr/bin/env bash
# Call S: 1. rung sm2 (two fp32 stages where the plan takes three) against the tree at 288, 384 and 6144 items, fp32
# gate mode 2, two passes in both orders (LADDER_S1.txt, LADDER_S2.txt); 2. the issues' targets grid on the tree, once
# (LADDER_QT.txt: decode in gate modes 2 and auto, bf16, append Qr = 8 / 16 beside decode, record / fused q = 4);
# 3. on an H200 only, rungs pfa and pft against the tree at 768–24,576 items (fp32 gate mode 2) and bf16 `auto` at
# 6144 and 24,576, two passes (LADDER_S3.txt, LADDER_S4.txt): the
# H200 streams a decode step at about 0.94 x its copy ceiling where the H100 reaches 0.99, so more state in flight may
# pay there although it lost on the H100 (session 51).
# Binaries: .gpuS (build_S.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuS/binS.tar.xz -C /tmp/b
D=docs/data/ladder_s54/prepared
if [[ $GPU == *H200* ]]; then L="$D/LADDER_S1.txt $D/LADDER_S3.txt $D/LADDER_S2.txt $D/LADDER_S4.txt"; else L="$D/LADDER_S1.txt $D/LADDER_S2.txt"; fi
# shellcheck disable=SC2086
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $L
mkdir -p /tmp/t && OUT=/tmp/t BIN=/tmp/b/bin STAGES=ladder LADDER="$(paste -sd';' $D/LADDER_QT.txt)" scripts/gpu_run.sh > /tmp/targets_run.txt 2>&1
cp /tmp/targets_run.txt /tmp/t/run.txt  # written outside /tmp/t: gpu_run.sh packs its OUT's files into logs.tgz
tar czf "$OUT/targets.tgz" -C /tmp/t .
echo "--- ladder"; cat "$OUT/ladder_summary.txt"; echo "--- targets"; tail -5 /tmp/targets_run.txt
