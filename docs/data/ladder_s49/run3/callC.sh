#!/usr/bin/env bash
# Call C (session 49): the final tree's GPU checks on any card: the whole C++ GPU suite (four shards), golden on
# CUDA through the tree's wheel, the sanitizer matrix under memcheck and racecheck, then the CUDA fuzzer
# (3,200 configurations in four chunks side by side, ending in time for the call's limit).
# Binaries: .gpuC/binC.tar.xz (kda_tests, kda_cuda_tests, kda_bench of the tree), the wheel .gpuC/*.whl.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpuC/binC.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT WHEEL=$(ls .gpuC/*.whl) STAGES="cuda golden sanitizer fuzz" GTEST_SHARDS=4 \
  SANITIZER_SETS=matrix SANITIZER_TOOLS="memcheck racecheck" FUZZ_CONFIGS=3200 FUZZ_PARALLEL=1 FUZZ_DEADLINE=575 \
  scripts/gpu_run.sh 2>&1 | tail -40
