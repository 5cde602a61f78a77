#!/usr/bin/env bash
# RUNG sgf: kda_bench_sgf<N> / kda_cuda_tests_sgf<N> against /work/main/build/gpu's library; KINDS = step kind bits.
set -euo pipefail
R=/work/rungs/sgf; B=/work/main/build/gpu; N=$1; KINDS=$2; D="-DKDA_SGF_KINDS=${KINDS}u"
NV="/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKDA_WITH_CUDA=1 -I/work/main/include -I/work/main/src -isystem=/usr/local/cuda/include -O3 -DNDEBUG -Xcompiler=-fPIC -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills -std=c++20 $D"
mkdir -p $R/obj$N
$NV -x cu -c $R/inst/sgf.cu -o $R/obj$N/inst.o 2> $R/obj$N/inst.log &
$NV -I/work/main/src/cuda -x cu -c $R/cuda_backend.cu -o $R/obj$N/backend.o 2> $R/obj$N/backend.log
wait
cudalib=/usr/local/cuda/targets/x86_64-linux/lib
O="$R/obj$N/inst.o $R/obj$N/backend.o"
c++ -O3 $B/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $O -o $R/kda_bench_sgf$N -L$cudalib $B/libkda_core.a $cudalib/libcudart_static.a -ldl -lrt -lpthread
c++ -O3 $B/tests/cpp/CMakeFiles/kda_cuda_tests.dir/test_cuda.cpp.o $(find $B/tests/cpp/CMakeFiles/kda_cuda_tests.dir -name '*.cu.o' | sort) $O -o $R/kda_cuda_tests_sgf$N \
  -L$cudalib $B/libkda_core.a $(find $B /usr/lib -name libgtest_main.a | head -1) $(find $B /usr/lib -name libgtest.a | head -1) $cudalib/libcudart_static.a -ldl -lrt -lpthread
echo built $N
