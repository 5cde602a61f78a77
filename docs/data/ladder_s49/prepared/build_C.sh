#!/usr/bin/env bash
# Builds .gpuC for run3/callC.sh (the final tree's GPU checks): the tree's kda_tests, kda_cuda_tests, kda_bench for
# sm_90a, its wheel, and the planted bug's test binary (bug_q_one_rounding.diff: the recording kinds' six-CTA kernels
# scale q with one rounding; the bitwise append-then-flush = decode test must fail on it). About 10 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DKDA_CPU_ONLY=OFF -DKDA_CUDA_ARCHS=90a -DKDA_BUILD_TESTS=ON \
  -DKDA_BUILD_BENCHMARKS=ON >/dev/null
ninja -C build/gpu kda_tests kda_cuda_tests kda_bench >/dev/null
rm -rf .gpuC && mkdir -p .gpuC/bin && cp build/gpu/tests/cpp/kda_tests build/gpu/tests/cpp/kda_cuda_tests build/gpu/benchmarks/kda_bench .gpuC/bin/
tar cJf .gpuC/binC.tar.xz -C .gpuC bin && rm -rf .gpuC/bin
rm -rf /tmp/bugC && mkdir -p /tmp/bugC && cp -r include /tmp/bugC/ && (cd /tmp/bugC && patch -p1 < "$OLDPWD/docs/data/ladder_s49/prepared/bug_q_one_rounding.diff")
INST="step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1_nofb_occ6_drop" INCLUDE=/tmp/bugC/include TARGET=kda_cuda_tests \
  benchmarks/ladder/build_variants.sh /tmp/bugC/bin bug=""
tar cJf .gpuC/bugC.tar.xz -C /tmp/bugC bin/kda_cuda_tests_bug
PYENV_VERSION=${PYENV_VERSION:-3.12.1} KDA_CUDA_ARCHS=90a python3.12 -m pip wheel --no-deps -w .gpuC . >/dev/null
grep -q '^.gpuC/' .git/info/exclude 2>/dev/null || echo '.gpuC/' >> .git/info/exclude
ls -la .gpuC
