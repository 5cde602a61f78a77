#!/usr/bin/env bash
# RUNG nb (session 49, built, not run): the Wide kernels at q = 1 and with the q >= 2 first wave without the
# staged-inputs barrier where the step has no F_B dot (rung_nb.diff). kda_bench_nb, kda_cuda_tests_nb, kda_tests_nb
# against build/gpu's library (the tree; build_C.sh builds it), every Wide instantiation compiled again.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/nb && mkdir -p /tmp/nb && cp -r include /tmp/nb/ && (cd /tmp/nb && patch -p1 < "$OLDPWD/docs/data/ladder_s49/prepared/rung_nb.diff")
INST="$(ls src/cuda/inst | grep '^step_split1_' | sed 's/\.cu$//' | tr '\n' ' ')" INCLUDE=/tmp/nb/include \
  TARGET="kda_bench kda_cuda_tests kda_tests" benchmarks/ladder/build_variants.sh .gpuE/bin nb=""
mkdir -p .gpuE/pack && tar cJf .gpuE/pack/binE.tar.xz -C .gpuE bin/kda_bench_nb bin/kda_cuda_tests_nb bin/kda_tests_nb
grep -q '^.gpuE/' .git/info/exclude 2>/dev/null || echo '.gpuE/' >> .git/info/exclude
