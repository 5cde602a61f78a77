#!/usr/bin/env bash
# Session 70's call G2 (after call G), carry [".kdawhl70"] (build_G.sh): the Python suite, golden on CUDA and the CUDA
# fuzzer (3000 configurations) with the wheel of the tree with rung fd, in CAP seconds (default 560).
set -uo pipefail
CAP=${CAP:-560}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/o/P
OUT=/tmp/o/P STAGES="pytest golden fuzz" WHEEL="$(ls .kdawhl70/*.whl)" PYTEST_TIMEOUT=$((CAP * 11 / 20)) \
  FUZZ_CONFIGS=3000 FUZZ_SEED0=20261700 FUZZ_DEADLINE=$((CAP - 10)) timeout $CAP scripts/gpu_run.sh > /tmp/o/P/py.txt 2>&1
tail -25 /tmp/o/P/py.txt | tee "$OUT/py.txt"
tar czf "$OUT/py.tgz" -C /tmp/o P
