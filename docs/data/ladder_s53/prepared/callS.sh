#!/usr/bin/env bash
# Call S (session 53, the session's last device seconds): callN.sh's ladder cut to fp32 gate mode 2 at 384, 1536 and
# 3072 items (LADDER_S1.txt, LADDER_S2.txt: the tree, session 52's tree `s52`, rung `ew`), two passes in both orders.
# Binaries: .gpuN (build_N.sh). About a minute.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuN/binN.tar.xz -C /tmp/b bin/kda_bench bin/kda_bench_s52 bin/kda_bench_ew
D=docs/data/ladder_s53/prepared
n=$(wc -l < $D/LADDER_S1.txt)
mkdir -p /tmp/all
for pass in 1 2; do
  BIN=/tmp/b/bin OUT=/tmp/o$pass STAGES=ladder LADDER="$(paste -sd';' $D/LADDER_S$pass.txt)" scripts/gpu_run.sh 2>&1 | tail -1
  mkdir -p /tmp/t$pass && tar xzf /tmp/o$pass/logs.tgz -C /tmp/t$pass
  for f in /tmp/t$pass/ladder_*.csv; do b=$(basename "$f" .csv); i=${b##*_}; cp "$f" "/tmp/all/${b%_*}_$((i + (pass - 1) * n)).csv"; done
  tar czf "$OUT/ladder.tgz" -C /tmp/all .
  python3 benchmarks/ladder/summarize.py /tmp/all/ladder_*.csv > "$OUT/ladder_summary.txt" 2>&1
done
tail -12 "$OUT/ladder_summary.txt"
