#!/usr/bin/env bash
# Session 71's call N2 (after call N), carry [".kdawhl71n"] (build_N.sh): the Python suite whole, golden on CUDA and
# the CUDA fuzzer (3000 configurations) with the landed tree's wheel, in CAP seconds (default 560).
set -uo pipefail
CAP=${CAP:-560}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/o/P
OUT=/tmp/o/P STAGES="pytest golden fuzz" WHEEL="$(ls .kdawhl71n/*.whl)" PYTEST_TIMEOUT=$((CAP * 11 / 20)) \
  FUZZ_CONFIGS=3000 FUZZ_SEED0=20261720 FUZZ_DEADLINE=$((CAP - 10)) timeout $CAP scripts/gpu_run.sh > /tmp/o/P/py.txt 2>&1
tail -25 /tmp/o/P/py.txt | tee "$OUT/py.txt"
tar czf "$OUT/py.tgz" -C /tmp/o P
