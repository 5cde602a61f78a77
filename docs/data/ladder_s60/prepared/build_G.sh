#!/bin/bash
# Build of call G (prepared in session 60, not yet run): the lesson of the narrow form's stages (fewer state bytes in
# flight a CTA, a shorter chain) tried on fp32 q = 1. Rung f16 (rung_f16.diff): Wide fp32 q = 1 in 16-row chunks (two
# rows a warp) instead of 32; its planner keeps the bytes in flight (four 8 KiB stages where two 16 KiB ones were);
# f16s3 / f16s2: the same kernels with the planner's stage bytes cut to 24 / 16 KiB (KDA_STEP_STAGE_BYTES and
# KDA_STEP_STAGE_BYTES_MORE). Every Wide fp32 q = 1 instantiation and the planner compiled from a copy of include/
# patched with the diff, linked ahead of build/gpu's library; kda_bench_tree is build/gpu's (its fp32 kernels are the
# tree's). Output: .gpuG/binG.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); O=$W/bin; mkdir -p $O .gpuG
BUILD=build/gpu
cudalib=$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib
cp -r include $W/include && (cd $W && patch -s -p1 < "$OLDPWD/docs/data/ladder_s60/prepared/rung_f16.diff")
insts=()
for inst in step_split1_f32_q1 step_split1_f32_q1_keep step_split1_f32_q1_nofb step_split1_f32_q1_nofb_keep \
  step_split1_f32_q1_nofb_occ6; do
  cmd=$(ninja -C $BUILD -t commands kda_core | grep " -c [^ ]*inst/$inst.cu ")
  cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//' <<<"$cmd")
  cmd=${cmd// -I$PWD\/include / -I$W\/include }
  (cd $BUILD && eval "$cmd -o $O/inst_$inst.o") &
  insts+=("$O/inst_$inst.o")
  while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
done
wait
gm=$(find $BUILD /usr/lib -name 'libgtest_main.a' 2>/dev/null | head -1); gt=$(find $BUILD /usr/lib -name 'libgtest.a' 2>/dev/null | head -1)
T=$BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir
L="-L$cudalib $BUILD/libkda_core.a"
for spec in "f16=" "f16s3=-DKDA_STEP_STAGE_BYTES=24576 -DKDA_STEP_STAGE_BYTES_MORE=24576" \
  "f16s2=-DKDA_STEP_STAGE_BYTES=16384 -DKDA_STEP_STAGE_BYTES_MORE=16384"; do
  n=${spec%%=*} defs=${spec#*=}
  c++ -DKDA_WITH_CUDA=1 -I$W/include -Isrc -isystem "$(dirname "$(command -v nvcc)")/../include" -O3 -DNDEBUG \
    -ffp-contract=off -std=gnu++20 $defs -c src/plan/plan.cpp -o $O/plan_$n.o
  c++ -O3 $BUILD/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o "${insts[@]}" $O/plan_$n.o -o $O/kda_bench_$n $L \
    $cudalib/libcudart_static.a -ldl -lrt -lpthread
  [[ $n == f16 ]] && c++ -O3 $T/test_cuda.cpp.o $T/cuda_test_kernels.cu.o $T/test_cuda_numerics.cu.o "${insts[@]}" \
    $O/plan_$n.o -o $O/kda_cuda_tests_$n $L $gm $gt $cudalib/libcudart_static.a -ldl -lrt -lpthread
done
cp $BUILD/benchmarks/kda_bench $O/kda_bench_tree
rm -f $O/*.o
tar cf - -C $W bin | xz -T2 -6 > .gpuG/binG.tar.xz
ls -la .gpuG
