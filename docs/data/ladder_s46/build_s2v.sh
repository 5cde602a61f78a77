#!/usr/bin/env bash
# Builds kda_bench_s2v against /work/ku/build/gpu's library: this folder's include copy, dispatch and instantiation.
set -euo pipefail
R=/work/rungs/s2v; B=/work/ku/build/gpu; MB=${MB:-4}; N=${N:-s2v}; D="-DKDA_SPLIT_VERIFY_SMALL_GRID=0 -DKDA_S2V_MB=$MB"
NV="/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -DKDA_WITH_CUDA=1 -I$R/include -I/work/ku/src -isystem=/usr/local/cuda/include -O3 -DNDEBUG -Xcompiler=-fPIC -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo -Xptxas=-warn-spills -std=c++20 $D"
mkdir -p $R/obj$MB
$NV -x cu -c $R/src/cuda/inst/step_split2_f32_q4_nofb_s2v.cu -o $R/obj$MB/inst.o 2> $R/obj$MB/inst.log &
$NV -x cu -c $R/src/cuda/cuda_backend.cu -o $R/obj$MB/backend.o 2> $R/obj$MB/backend.log
c++ -DKDA_WITH_CUDA=1 -I$R/include -I/work/ku/src -isystem /usr/local/cuda/include -O3 -DNDEBUG -ffp-contract=off -std=gnu++20 $D -c /work/ku/src/plan/plan.cpp -o $R/obj$MB/plan.o
wait
cudalib=/usr/local/cuda/targets/x86_64-linux/lib
c++ -O3 $B/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o $R/obj$MB/inst.o $R/obj$MB/backend.o $R/obj$MB/plan.o -o $R/kda_bench_$N \
  -L$cudalib $B/libkda_core.a $cudalib/libcudart_static.a -ldl -lrt -lpthread
echo built $R/kda_bench_$N
