#!/usr/bin/env bash
# Call E (session 49, prepared, not run): rung nb1 (build_nb1.sh; carry .gpuC and .gpuE/pack). Its whole C++ GPU suite
# (four shards) and the sanitizer matrix under racecheck and synccheck on its kda_tests (the barrier it drops), then
# LADDER_NB1 against the tree's kda_bench (.gpuC): fp32 decode in gate mode 2 at 96-12,288 items and `auto` beside
# vLLM, bf16 decode, fp32 append Qr = 8, record / fused at q = 1; two passes, both orders.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b /tmp/e/bin && tar xJf .gpuC/binC.tar.xz -C /tmp/b && tar xJf .gpuE/pack/binE.tar.xz -C /tmp/e
cp /tmp/e/bin/kda_cuda_tests_nb1 /tmp/e/bin/kda_cuda_tests && cp /tmp/e/bin/kda_tests_nb1 /tmp/e/bin/kda_tests
cp /tmp/e/bin/kda_bench_nb1 /tmp/b/bin/kda_bench_nb1
BIN=/tmp/e/bin OUT=$OUT/nb1 STAGES="cuda sanitizer" GTEST_SHARDS=4 SANITIZER_SETS=matrix SANITIZER_TOOLS="racecheck synccheck" \
  scripts/gpu_run.sh 2>&1 | tail -12
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$(cat docs/data/ladder_s49/prepared/LADDER_NB1.txt)" scripts/gpu_run.sh 2>&1 | tail -60
