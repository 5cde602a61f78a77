#!/usr/bin/env bash
# Call T: the decode bounds at the step's own bytes — rows_prepared's move, rows, moveio and rowsio (`--io`) beside
# kda_bench in gate mode 2 at 384–6144 items, two passes in both orders (LADDER_T1.txt, LADDER_T2.txt), each pass's
# verdict (benchmarks/ladder/bounds_verdict.py; on an H100 vLLM's H200 figures make its 0.90 x vLLM lines moot).
# Binaries: .gpuT (build_T.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuT/binT.tar.xz -C /tmp/b
D=docs/data/ladder_s54/prepared
for p in 1 2; do
  (( p == 2 && SECONDS > ${T_PASS2_BEFORE:-100000} )) && break  # (a short call: the second pass only if there is time)
  mkdir -p /tmp/p$p && OUT=/tmp/p$p BIN=/tmp/b/bin STAGES=ladder LADDER="$(paste -sd';' $D/LADDER_T$p.txt)" \
    scripts/gpu_run.sh > /tmp/p$p/run.txt 2>&1
  tar czf "$OUT/pass$p.tgz" -C /tmp/p$p .
  [[ -f /tmp/p$p/logs.tgz ]] && tar xzf /tmp/p$p/logs.tgz -C /tmp/p$p  # (gpu_run.sh packs a folder of more than eight files)
  python3 benchmarks/ladder/bounds_verdict.py /tmp/p$p > "$OUT/verdict$p.txt" 2>&1
  grep -hE "^(move|rows|moveio|rowsio) " /tmp/p$p/ladder_rows_prepared_*.txt > "$OUT/rungs$p.txt" 2>/dev/null
done
cat "$OUT/verdict1.txt"; for p in 1 2; do echo "--- pass $p"; cat "$OUT/rungs$p.txt"; grep -h "^decode" /tmp/p$p/ladder_kda_bench_*.txt; done
