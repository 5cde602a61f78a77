#!/bin/bash
# Build of call F (session 60): this tree's narrow form (16-row chunks, three stages: `tree`) and rung s2 (two stages,
# -DKDA_STEP_NARROW_STAGES=2): the narrow instantiation and the planner compiled from the tree (with the rung's
# definition) and linked ahead of build/gpu's library (built before the narrow form's chunks and stages changed; its
# other kernels are the tree's). Output: .gpuF/binF.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); O=$W/bin; mkdir -p $O .gpuF
BUILD=build/gpu
cudalib=$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib
cmd=$(ninja -C $BUILD -t commands kda_core | grep " -c [^ ]*inst/step_split1_bf16_q1_nofb_narrow.cu ")
cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//' <<<"$cmd")
gm=$(find $BUILD /usr/lib -name 'libgtest_main.a' 2>/dev/null | head -1); gt=$(find $BUILD /usr/lib -name 'libgtest.a' 2>/dev/null | head -1)
T=$BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir
L="-L$cudalib $BUILD/libkda_core.a"
for spec in "tree=" "s2=-DKDA_STEP_NARROW_STAGES=2"; do
  n=${spec%%=*} defs=${spec#*=}
  (cd $BUILD && eval "$cmd $defs -o $O/inst_$n.o") &
  c++ -DKDA_WITH_CUDA=1 -Iinclude -Isrc -isystem "$(dirname "$(command -v nvcc)")/../include" -O3 -DNDEBUG \
    -ffp-contract=off -std=gnu++20 $defs -c src/plan/plan.cpp -o $O/plan_$n.o
  wait
  c++ -O3 $T/test_cuda.cpp.o $T/cuda_test_kernels.cu.o $T/test_cuda_numerics.cu.o $O/inst_$n.o $O/plan_$n.o \
    -o $O/kda_cuda_tests_$n $L $gm $gt $cudalib/libcudart_static.a -ldl -lrt -lpthread
  c++ -O3 $BUILD/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $O/inst_$n.o $O/plan_$n.o -o $O/kda_bench_$n $L \
    $cudalib/libcudart_static.a -ldl -lrt -lpthread
done
rm -f $O/*.o
tar cf - -C $W bin | xz -T2 -6 > .gpuF/binF.tar.xz
ls -la .gpuF
