#!/usr/bin/env bash
# Call C (prepared in session 46): the nc2b branch's GPU suite, golden, ladder (nc2b against the merged tree; sgf
# rungs), the sanitizer matrix under racecheck and memcheck, ncu of append Qr = 8 / 16 at H = 96, B = 256, and the
# CUDA fuzzer on the branch's wheel. About 450 s.
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu11/bin11.tar.xz -C /tmp/b
A="--H 96 --B 256 --mode append --gate auto --state f32 --layout sd --variant auto"
BIN=/tmp/b/bin OUT=$OUT WHEEL=$(ls .gpu11/*.whl) STAGES="cuda golden ladder sanitizer ncu fuzz" GTEST_SHARDS=4 GTEST_TIMEOUT=200 \
  LADDER="$(cat .gpu11/LADDER11.txt)" SANITIZER_SETS=matrix SANITIZER_TOOLS="racecheck memcheck" \
  NCU_BIN=kda_bench NCU_KERNEL=kda_step NCU_ARGS="$A --qr 8;$A --qr 16" \
  FUZZ_CONFIGS=3200 FUZZ_CHUNKS=4 FUZZ_PARALLEL=1 FUZZ_SEED0=20261470 FUZZ_DEADLINE=540 scripts/gpu_run.sh 2>&1 | tail -45
