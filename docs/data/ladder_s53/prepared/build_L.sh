#!/usr/bin/env bash
# Builds .gpuL for callL.sh: the tree's kda_bench (as kda_bench_new), kda_cuda_tests and kda_tests, session 52's
# kda_bench from .gpuI, and kda_cuda_tests_bug (bug_swapped_bias.diff on a copy of include/).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_tests kda_cuda_tests kda_bench
rm -rf /tmp/rbug /tmp/binL && mkdir -p /tmp/rbug /tmp/binL/bin && cp -r include /tmp/rbug/ && (cd /tmp/rbug && patch -p0 include/kda/cuda/step_kernel.cuh < "$OLDPWD/docs/data/ladder_s53/prepared/bug_swapped_bias.diff")
INST="step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6" INCLUDE=/tmp/rbug/include TARGET=kda_cuda_tests \
  benchmarks/ladder/build_variants.sh /tmp/binL/bin bug="-DKDA_PLANT_SWAPPED_BIAS"
cp build/gpu/benchmarks/kda_bench /tmp/binL/bin/kda_bench_new && cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests /tmp/binL/bin/
tar xJf .gpuI/binI.tar.xz -C /tmp/binL bin/kda_bench
mkdir -p .gpuL && tar cf - -C /tmp/binL bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuL/binL.tar.xz
grep -q '^.gpuL/' .git/info/exclude 2>/dev/null || echo '.gpuL/' >> .git/info/exclude
