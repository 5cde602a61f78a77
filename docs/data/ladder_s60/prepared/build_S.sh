#!/bin/bash
# Build of call S (session 60): the narrow form's stages in flight. `tree`: this tree (the narrow form in 16-row chunks,
# four stages at eight CTAs per SM), its narrow instantiation and planner compiled from the tree and linked ahead of
# build/gpu's library (built before the chunks changed; its other kernels are the tree's); `s5`: kStepMaxStages 5, so
# that the planner gives the narrow form five stages (the most that fit eight CTAs per SM; every other form has at most
# four chunks); `s3`: the planner's narrow stage bytes cut to three 4 KiB stages. Each from a copy of include/ and
# src/plan/plan.cpp patched here (rung_s5.diff, rung_s3.diff). The diffs apply to the tree before three stages were
# merged (the parent of the commit that adds this script); on later trees `tree` already has three stages.
# NAMES: the rungs (default "tree s5 s3"). Output: .gpuS/binS.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); O=$W/bin; mkdir -p $O .gpuS
BUILD=build/gpu
cudalib=$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib
P=docs/data/ladder_s60/prepared
for n in ${NAMES:-tree s5 s3}; do
  mkdir -p $W/$n && cp -r include $W/$n/include && mkdir -p $W/$n/src/plan && cp src/plan/plan.cpp $W/$n/src/plan/
  [[ $n == tree ]] || (cd $W/$n && patch -s -p1 < "$OLDPWD/$P/rung_$n.diff")
done
cmd=$(ninja -C $BUILD -t commands kda_core | grep " -c [^ ]*inst/step_split1_bf16_q1_nofb_narrow.cu ")
cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//' <<<"$cmd")
for n in ${NAMES:-tree s5 s3}; do
  c=${cmd// -I$PWD\/include / -I$W\/$n\/include }
  (cd $BUILD && eval "$c -o $O/inst_$n.o") &
  c++ -DKDA_WITH_CUDA=1 -I$W/$n/include -Isrc -isystem "$(dirname "$(command -v nvcc)")/../include" -O3 -DNDEBUG \
    -ffp-contract=off -std=gnu++20 -c $W/$n/src/plan/plan.cpp -o $O/plan_$n.o
  wait
done
gm=$(find $BUILD /usr/lib -name 'libgtest_main.a' 2>/dev/null | head -1); gt=$(find $BUILD /usr/lib -name 'libgtest.a' 2>/dev/null | head -1)
T=$BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir
L="-L$cudalib $BUILD/libkda_core.a"
for n in ${NAMES:-tree s5 s3}; do
  c++ -O3 $T/test_cuda.cpp.o $T/cuda_test_kernels.cu.o $T/test_cuda_numerics.cu.o $O/inst_$n.o $O/plan_$n.o \
    -o $O/kda_cuda_tests_$n $L $gm $gt $cudalib/libcudart_static.a -ldl -lrt -lpthread
  c++ -O3 $BUILD/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $O/inst_$n.o $O/plan_$n.o -o $O/kda_bench_$n $L \
    $cudalib/libcudart_static.a -ldl -lrt -lpthread
done
rm -f $O/*.o
tar cf - -C $W bin | xz -T2 -6 > .gpuS/binS.tar.xz
ls -la .gpuS
