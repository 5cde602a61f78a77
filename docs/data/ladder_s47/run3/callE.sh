#!/usr/bin/env bash
# Call E (session 47): fla's per-token verify and decode chains beside kda_bench on the same card (the merged tree).
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu11/bin11.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT STAGES="fla ladder" FLA_ARGS="--mode per_token --q 4 --H 12,32,96 --B 1,8,64,256" \
  LADDER="$(cat .gpu12/LADDER_E.txt)" scripts/gpu_run.sh 2>&1 | tail -40
PYTHONPATH=/tmp/fla-site python3 benchmarks/fla_chain.py --mode decode --H 12,32,96 --B 1,8,64,256 --out "$OUT/fla_decode.csv" 2>&1 | tee "$OUT/fla_decode.txt" | tail -16
