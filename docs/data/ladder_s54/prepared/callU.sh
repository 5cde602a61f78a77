#!/usr/bin/env bash
# Call U (prepared for an H200): call T's ladder with the fixed rungs — rows_prepared's move, rows, moveio and rowsio
# (`--io`: the decode step's own bytes with a free prologue) beside kda_bench in gate mode 2 at 384–6144 items, two
# passes in both orders (LADDER_T1.txt, LADDER_T2.txt) through benchmarks/ladder/ladder_passes.sh, which writes the
# verdict over both passes (bounds_verdict.txt: `rows`' and, per target, `rowsio`'s). Binaries: .gpuT (build_T.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuT/binT.tar.xz -C /tmp/b
D=docs/data/ladder_s54/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_T1.txt $D/LADDER_T2.txt
mkdir -p /tmp/all && tar xzf "$OUT/ladder.tgz" -C /tmp/all
cat "$OUT/bounds_verdict.txt"
grep -HE "^(move|rows|moveio|rowsio) " /tmp/all/ladder_rows_prepared_*.txt | sed 's#^/tmp/all/##'
cat "$OUT/ladder_summary.txt"
