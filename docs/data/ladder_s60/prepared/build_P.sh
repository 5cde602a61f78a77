#!/bin/bash
# Build of call P (session 60): rung pn (the persistent narrow form: the narrow instantiation compiled again with
# -DKDA_STEP_NARROW_PERSISTENT=1) and the tests of this tree, linked against build/gpu's library as it is (its other
# objects are the tree's kernels), and pn7 (=7: registers cut for seven CTAs per SM, 72); kda_bench_tree is
# build/gpu's. Output: .gpuP/binP.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
O=$(mktemp -d)/bin; mkdir -p $O
BUILD=build/gpu
cudalib=$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib
cmd=$(ninja -C $BUILD -t commands kda_core | grep " -c [^ ]*inst/step_split1_bf16_q1_nofb_narrow.cu ")
cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//' <<<"$cmd")
(cd $BUILD && eval "$cmd -DKDA_STEP_NARROW_PERSISTENT=1 -o $O/inst_pn.o") &
(cd $BUILD && eval "$cmd -DKDA_STEP_NARROW_PERSISTENT=7 -o $O/inst_pn7.o") &
/usr/bin/c++ -DKDA_WITH_CUDA=1 -I/work/main/src -I/work/main/tests/cpp -I/work/main/include -isystem /usr/local/cuda/include -O3 -DNDEBUG -fPIE -DGTEST_HAS_PTHREAD=1 -std=gnu++20 -o $O/test_cuda.o -c tests/cpp/test_cuda.cpp &
wait
gm=$(find $BUILD /usr/lib -name 'libgtest_main.a' 2>/dev/null | head -1); gt=$(find $BUILD /usr/lib -name 'libgtest.a' 2>/dev/null | head -1)
tk="$BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir/cuda_test_kernels.cu.o $BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir/test_cuda_numerics.cu.o"
L="-L$cudalib $BUILD/libkda_core.a"
c++ -O3 $O/test_cuda.o $tk $O/inst_pn.o -o $O/kda_cuda_tests_pn $L $gm $gt $cudalib/libcudart_static.a -ldl -lrt -lpthread
c++ -O3 $O/test_cuda.o $tk -o $O/kda_cuda_tests_tree $L $gm $gt $cudalib/libcudart_static.a -ldl -lrt -lpthread
c++ -O3 $BUILD/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $O/inst_pn.o -o $O/kda_bench_pn $L $cudalib/libcudart_static.a -ldl -lrt -lpthread
c++ -O3 $BUILD/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $O/inst_pn7.o -o $O/kda_bench_pn7 $L $cudalib/libcudart_static.a -ldl -lrt -lpthread
cp $BUILD/benchmarks/kda_bench $O/kda_bench_tree
rm -f $O/*.o
tar cf - -C "$(dirname $O)" bin | xz -T2 -6 > .gpuP/binP.tar.xz
ls -la .gpuP
