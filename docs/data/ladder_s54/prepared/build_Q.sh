#!/usr/bin/env bash
# Builds .gpuQ for callQ.sh: the tree with heuristics::q1_decode_taps_before_wait (kda_bench, kda_cuda_tests);
# call P's tree (.gpuP's kda_bench) as kda_bench_old; rung k31 (.gpuP: every one-wave grid, <= 528 CTAs, on the kernel
# for every kind); the planted bug (bug_taps_rule.diff: the rule inverted) as kda_cuda_tests_plant. A backend variant
# is src/cuda/cuda_backend.cu patched in /tmp, compiled by the library's own command and linked ahead of the library.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
D=docs/data/ladder_s54/prepared
ninja -C build/gpu kda_bench kda_cuda_tests
rm -rf /tmp/binQ /tmp/plantQ && mkdir -p /tmp/binQ/bin /tmp/plantQ
cp src/cuda/cuda_backend.cu /tmp/plantQ/ && (cd /tmp/plantQ && patch -p0 cuda_backend.cu < "$OLDPWD/$D/bug_taps_rule.diff")
cmd=$(cd build/gpu && ninja -t commands kda_core | grep "src/cuda/cuda_backend.cu" | head -1)
cmd=$(echo "$cmd" | sed -E "s# -MD -MT [^ ]+ -MF [^ ]+##; s# -c [^ ]+cuda_backend.cu# -I$PWD/src/cuda -c /tmp/plantQ/cuda_backend.cu#; s# -o [^ ]+# -o /tmp/plantQ/cuda_backend.o#")
(cd build/gpu && eval "$cmd")
cudalib=$(dirname "$(command -v nvcc)")/..
(cd build/gpu && c++ -O3 -DNDEBUG tests/cpp/CMakeFiles/kda_cuda_tests.dir/test_cuda.cpp.o \
  tests/cpp/CMakeFiles/kda_cuda_tests.dir/test_cuda_numerics.cu.o tests/cpp/CMakeFiles/kda_cuda_tests.dir/cuda_test_kernels.cu.o \
  /tmp/plantQ/cuda_backend.o -o /tmp/binQ/bin/kda_cuda_tests_plant -L"$cudalib/targets/x86_64-linux/lib" libkda_core.a \
  "$(find /usr/lib /usr/src -name libgtest.a | head -1)" "$(find /usr/lib /usr/src -name libgtest_main.a | head -1)" \
  "$cudalib/lib/libcudart_static.a" -ldl -lrt -lcudadevrt -lcudart_static -lpthread)
cp build/gpu/benchmarks/kda_bench build/gpu/tests/cpp/kda_cuda_tests /tmp/binQ/bin/
mkdir -p /tmp/px && tar xJf .gpuP/binP.tar.xz -C /tmp/px bin/kda_bench bin/kda_bench_k31
cp /tmp/px/bin/kda_bench /tmp/binQ/bin/kda_bench_old && cp /tmp/px/bin/kda_bench_k31 /tmp/binQ/bin/
mkdir -p .gpuQ && tar cf - -C /tmp/binQ bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuQ/binQ.tar.xz
grep -q '^.gpuQ/' .git/info/exclude 2>/dev/null || echo '.gpuQ/' >> .git/info/exclude
ls -la .gpuQ
