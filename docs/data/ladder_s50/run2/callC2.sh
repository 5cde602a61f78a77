#!/usr/bin/env bash
# Call C2 (session 50): the final tree's GPU checks on any card, with the staged-inputs barrier kept only for the
# F_B dot in the recording kinds' kernels (StepTraits::kStagedBarrierForFbOnly): the whole C++ GPU suite (four
# shards), golden on CUDA through the tree's wheel, the sanitizer matrix under memcheck (rung nb's racecheck and
# synccheck ran in run 1 on a superset of the change), the CUDA fuzzer (3,200 configurations); a planted bug
# (kda_cuda_tests_bug: the recording kinds' six-CTA kernels scale q with one rounding; the bitwise append = decode
# identity must fail); on an H200 also the targets' grid (ladder_s49/run4/LADDER_T.txt).
# Binaries: .gpuC (git-ignored), built by docs/data/ladder_s49/prepared/build_C.sh.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpuC/binC.tar.xz -C /tmp/b && tar xJf .gpuC/bugC.tar.xz -C /tmp/b
S="cuda golden sanitizer fuzz"
case "$GPU" in *H200*) S="cuda golden ladder sanitizer fuzz";; esac
BIN=/tmp/b/bin OUT=$OUT WHEEL=$(ls .gpuC/*.whl) STAGES="$S" GTEST_SHARDS=4 \
  CUDA_TESTS_VARIANTS="bug" CUDA_VARIANTS_FILTER_bug="CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.Bf16SixCtasPerSmWide" \
  SANITIZER_SETS=matrix SANITIZER_TOOLS="memcheck" FUZZ_CONFIGS=3200 FUZZ_PARALLEL=1 FUZZ_DEADLINE=580 \
  LADDER="$(cat docs/data/ladder_s49/run4/LADDER_T.txt)" scripts/gpu_run.sh 2>&1 | tail -75
