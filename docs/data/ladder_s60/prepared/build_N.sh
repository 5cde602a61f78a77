#!/bin/bash
# Build of call N (session 60): rung n16, the narrow form in 16-row chunks (four stages) instead of 32-row ones (two):
# the narrow instantiation and the planner compiled again with -DKDA_STEP_NARROW_CHUNK_ROWS=16, linked ahead of
# build/gpu's library (the tree's kernels; its narrow form in 32-row chunks); kda_bench_tree and kda_cuda_tests_tree
# are build/gpu's. Output: .gpuN/binN.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
O=$(mktemp -d)/bin; mkdir -p $O .gpuN
BUILD=build/gpu
cudalib=$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib
DEFS="-DKDA_STEP_NARROW_CHUNK_ROWS=16"
cmd=$(ninja -C $BUILD -t commands kda_core | grep " -c [^ ]*inst/step_split1_bf16_q1_nofb_narrow.cu ")
cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//' <<<"$cmd")
(cd $BUILD && eval "$cmd $DEFS -o $O/inst_n16.o") &
c++ -DKDA_WITH_CUDA=1 -Iinclude -Isrc -isystem "$(dirname "$(command -v nvcc)")/../include" -O3 -DNDEBUG \
  -ffp-contract=off -std=gnu++20 $DEFS -c src/plan/plan.cpp -o $O/plan_n16.o &
wait
gm=$(find $BUILD /usr/lib -name 'libgtest_main.a' 2>/dev/null | head -1); gt=$(find $BUILD /usr/lib -name 'libgtest.a' 2>/dev/null | head -1)
T=$BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir
L="-L$cudalib $BUILD/libkda_core.a"
c++ -O3 $T/test_cuda.cpp.o $T/cuda_test_kernels.cu.o $T/test_cuda_numerics.cu.o $O/inst_n16.o $O/plan_n16.o \
  -o $O/kda_cuda_tests_n16 $L $gm $gt $cudalib/libcudart_static.a -ldl -lrt -lpthread
c++ -O3 $BUILD/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $O/inst_n16.o $O/plan_n16.o -o $O/kda_bench_n16 $L \
  $cudalib/libcudart_static.a -ldl -lrt -lpthread
cp $BUILD/benchmarks/kda_bench $O/kda_bench_tree
rm -f $O/*.o
tar cf - -C "$(dirname $O)" bin | xz -T2 -6 > .gpuN/binN.tar.xz
ls -la .gpuN
