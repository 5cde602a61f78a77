#!/usr/bin/env bash
# RUNG nc2b: kda_bench_nc2b and kda_cuda_tests_nc2b against /work/ku/build/gpu's library.
set -euo pipefail
R=/work/rungs/nc2; B=/work/ku/build/gpu; D="-DKDA_SPLIT2_BF16_Q1_ONE_CHUNK=1"
NV="/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKDA_WITH_CUDA=1 -I$R/include -I$R/src -isystem=/usr/local/cuda/include -O3 -DNDEBUG -Xcompiler=-fPIC -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills -std=c++20 $D"
mkdir -p $R/obj
$NV -x cu -c $R/src/cuda/inst/step_split2_bf16_q1.cu -o $R/obj/i1.o 2> $R/obj/i1.log &
$NV -x cu -c $R/src/cuda/inst/step_split2_bf16_q1_keep.cu -o $R/obj/i2.o 2> $R/obj/i2.log
wait
$NV -x cu -c $R/src/cuda/cuda_backend.cu -o $R/obj/backend.o 2> $R/obj/backend.log &
c++ -DKDA_WITH_CUDA=1 -I$R/include -I$R/src -isystem /usr/local/cuda/include -O3 -DNDEBUG -ffp-contract=off -std=gnu++20 $D -c $R/src/plan/plan.cpp -o $R/obj/plan.o
wait
cudalib=/usr/local/cuda/targets/x86_64-linux/lib
O="$R/obj/i1.o $R/obj/i2.o $R/obj/backend.o $R/obj/plan.o"
c++ -O3 $B/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $O -o $R/kda_bench_nc2b -L$cudalib $B/libkda_core.a $cudalib/libcudart_static.a -ldl -lrt -lpthread
c++ -O3 $B/tests/cpp/CMakeFiles/kda_cuda_tests.dir/test_cuda.cpp.o $(find $B/tests/cpp/CMakeFiles/kda_cuda_tests.dir -name '*.cu.o' | sort) $O -o $R/kda_cuda_tests_nc2b \
  -L$cudalib $B/libkda_core.a $(find $B /usr/lib -name libgtest_main.a | head -1) $(find $B /usr/lib -name libgtest.a | head -1) $cudalib/libcudart_static.a -ldl -lrt -lpthread
echo built
