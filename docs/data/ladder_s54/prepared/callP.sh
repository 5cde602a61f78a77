#!/usr/bin/env bash
# Call P: 1. fp32 gate mode 2 decode at 384 items (and 768 as a control) — the tree, session 52's tree (`s52`) and
# rung `k31` (rung_k31.diff: one-wave grids of that step on Wide's fp32 kernel for every kind, which loads its conv
# taps at the conv) — two passes in both orders (LADDER_P1.txt, LADDER_P2.txt); 2. the tree's checks left open in
# session 53: the whole C++ GPU suite (four shards side by side), golden on CUDA with the tree's wheel, synccheck and
# initcheck on the sanitizer matrix, the CUDA fuzzer (3,200 configurations). Binaries: .gpuP (build_P.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuP/binP.tar.xz -C /tmp/b
D=docs/data/ladder_s54/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_P1.txt $D/LADDER_P2.txt
mkdir -p /tmp/v
OUT=/tmp/v BIN=/tmp/b/bin WHEEL=$(ls .gpuP/*.whl) STAGES="cuda golden fuzz" GTEST_SHARDS=4 GTEST_TIMEOUT=240 \
  FUZZ_CONFIGS=3200 FUZZ_CHUNKS=4 FUZZ_PARALLEL=1 FUZZ_SEED0=20261540 FUZZ_DEADLINE=380 scripts/gpu_run.sh > /tmp/v/gpu_run.txt 2>&1
mkdir -p /tmp/s  # what is left of the call's ten minutes: synccheck and initcheck on the sanitizer matrix
OUT=/tmp/s BIN=/tmp/b/bin STAGES=sanitizer SANITIZER_SETS=matrix SANITIZER_TOOLS="synccheck initcheck" \
  timeout $((560 - SECONDS)) scripts/gpu_run.sh > /tmp/s/gpu_run.txt 2>&1
cp -r /tmp/s /tmp/v/sanitizer
tar czf "$OUT/validation.tgz" -C /tmp/v .
tail -8 /tmp/v/gpu_run.txt; tail -6 /tmp/s/gpu_run.txt
echo "--- ladder"; cat "$OUT/ladder_summary.txt"
