#!/usr/bin/env bash
# Builds .gpuP for callP.sh: the tree's kda_bench, kda_cuda_tests and kda_tests (build/gpu), session 52's kda_bench
# (from .gpuN) as kda_bench_s52, rung k31 (kda_bench_k31: src/cuda/cuda_backend.cu with rung_k31.diff, linked ahead
# of the tree's library), rung st1 (one fp32 state stage per CTA where the plan kept two or three, spread grids aside)
# and the tree's wheel (.whl/, built with KDA_CUDA_ARCHS=90a).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench kda_cuda_tests kda_tests
rm -rf /tmp/binP /tmp/k31 && mkdir -p /tmp/binP/bin /tmp/k31
cp src/cuda/cuda_backend.cu /tmp/k31/ && (cd /tmp/k31 && patch -p0 cuda_backend.cu < "$OLDPWD/docs/data/ladder_s54/prepared/rung_k31.diff")
cmd=$(cd build/gpu && ninja -t commands kda_core | grep "src/cuda/cuda_backend.cu" | head -1)
cmd=$(echo "$cmd" | sed -E "s# -MD -MT [^ ]+ -MF [^ ]+##; s# -c [^ ]+cuda_backend.cu# -I$PWD/src/cuda -c /tmp/k31/cuda_backend.cu#; s# -o [^ ]+# -o /tmp/k31/cuda_backend_k31.o#")
(cd build/gpu && eval "$cmd")
(cd build/gpu && c++ -O3 -DNDEBUG benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o /tmp/k31/cuda_backend_k31.o \
  -o /tmp/binP/bin/kda_bench_k31 -L"$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib" libkda_core.a \
  "$(dirname "$(command -v nvcc)")/../lib/libcudart_static.a" -ldl -lrt -lcudadevrt -lcudart_static -lpthread)
benchmarks/ladder/build_variants.sh /tmp/binP/bin st1="-DKDA_STEP_STAGE_BYTES=16384 -DKDA_STEP_MORE_STAGES_MIN_CTAS=100000000"
cp build/gpu/benchmarks/kda_bench build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests /tmp/binP/bin/
mkdir -p /tmp/s52x && tar xJf .gpuN/binN.tar.xz -C /tmp/s52x bin/kda_bench_s52 && cp /tmp/s52x/bin/kda_bench_s52 /tmp/binP/bin/
mkdir -p .gpuP && rm -f .gpuP/*.whl && cp .whl/kda_decode-*cp312*.whl .gpuP/
tar cf - -C /tmp/binP bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuP/binP.tar.xz
grep -q '^.gpuP/' .git/info/exclude 2>/dev/null || echo '.gpuP/' >> .git/info/exclude
ls -la .gpuP
