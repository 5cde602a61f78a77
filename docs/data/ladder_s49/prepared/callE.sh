#!/usr/bin/env bash
# Call E (session 49, prepared, not run): rung nb (build_nb.sh after build_C.sh; carry [".gpuC", ".gpuE/pack"]). Its
# whole C++ GPU suite (four shards) and the sanitizer matrix under racecheck and synccheck on its kda_tests (the barrier
# it drops), then LADDER_NB against the tree's kda_bench (.gpuC): fp32 decode in gate mode 2 at 96-12,288 items and
# `auto` beside vLLM, bf16 decode, fp32 append Qr = 8, record / fused q = 2, 4 at H = 96 (one to 64 requests) and
# q = 2-4 at H = 4, 12 at one request, per_token q = 4; two passes, both orders.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b /tmp/e && tar xJf .gpuC/binC.tar.xz -C /tmp/b && tar xJf .gpuE/pack/binE.tar.xz -C /tmp/e
cp /tmp/e/bin/kda_cuda_tests_nb /tmp/e/bin/kda_cuda_tests && cp /tmp/e/bin/kda_tests_nb /tmp/e/bin/kda_tests
cp /tmp/e/bin/kda_bench_nb /tmp/b/bin/kda_bench_nb
BIN=/tmp/e/bin OUT=$OUT/nb STAGES="cuda sanitizer" GTEST_SHARDS=4 SANITIZER_SETS=matrix SANITIZER_TOOLS="racecheck synccheck" \
  scripts/gpu_run.sh 2>&1 | tail -12
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$(cat docs/data/ladder_s49/prepared/LADDER_NB.txt)" scripts/gpu_run.sh 2>&1 | tail -80
