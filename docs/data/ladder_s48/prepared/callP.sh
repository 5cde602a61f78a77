#!/usr/bin/env bash
# Prepared call P (session 48, not run): the final tree's GPU checks (the whole suite in four shards, golden on CUDA with
# its wheel, the CUDA fuzzer, the sanitizer matrix under memcheck) and, for the next rules, record / fused at q = 4-7 on
# Split against Wide at up to 12 items, and fp32 decode at 145-155 items (the edge of kDecodeRules' Split 2 range).
# Build here first: `ninja -C build/gpu kda_tests kda_cuda_tests kda_bench` into .gpuP/bin (tar cJf .gpuP/binP.tar.xz),
# the wheel with `KDA_CUDA_ARCHS=90a python3.12 -m pip wheel --no-deps -w .gpuP .`; .gpuP listed in .git/info/exclude;
# carry [".gpuP"].
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpuP/binP.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
BIN=/tmp/b/bin OUT=$OUT WHEEL=$(ls .gpuP/*.whl) STAGES="cuda golden fuzz sanitizer ladder" GTEST_SHARDS=4 FUZZ_PARALLEL=1 \
  SANITIZER_SETS=matrix SANITIZER_TOOLS=memcheck LADDER="$(cat docs/data/ladder_s48/prepared/LADDER_P.txt)" \
  scripts/gpu_run.sh 2>&1 | tail -40
