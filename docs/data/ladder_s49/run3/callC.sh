#!/usr/bin/env bash
# Call C (session 49): the final tree's GPU checks on any card: the whole C++ GPU suite (four shards), golden on
# CUDA through the tree's wheel, the sanitizer matrix under memcheck, racecheck and synccheck, then the CUDA fuzzer
# (3,200 configurations in four chunks side by side, ending in time for the call's limit); and a planted bug:
# kda_cuda_tests_bug (.gpuC/bugC.tar.xz), whose six-CTA kernels of the recording kinds scale q with one rounding
# ((y_q · (1/|y_q| · scale)) instead of the register path's two: the bitwise append = decode identity must fail).
# Binaries: .gpuC/binC.tar.xz (kda_tests, kda_cuda_tests, kda_bench of the tree), the wheel .gpuC/*.whl, the bug binary
# .gpuC/bugC.tar.xz: built by docs/data/ladder_s49/prepared/build_C.sh (.gpuC is git-ignored; rebuild it in a new checkout).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpuC/binC.tar.xz -C /tmp/b && tar xJf .gpuC/bugC.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT WHEEL=$(ls .gpuC/*.whl) STAGES="cuda golden sanitizer fuzz" GTEST_SHARDS=4 \
  CUDA_TESTS_VARIANTS="bug" CUDA_VARIANTS_FILTER_bug="CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.Bf16SixCtasPerSmWide" \
  SANITIZER_SETS=matrix SANITIZER_TOOLS="memcheck racecheck synccheck" FUZZ_CONFIGS=3200 FUZZ_PARALLEL=1 FUZZ_DEADLINE=575 \
  scripts/gpu_run.sh 2>&1 | tail -40
