#!/bin/bash
# Build of call G (prepared in session 60, not yet run): the lesson of the narrow form's stages (fewer state bytes in
# flight a CTA, a shorter chain) tried on fp32 q = 1. Rung f16 (rung_f16.diff): Wide fp32 q = 1 in 16-row chunks (two
# rows a warp) instead of 32; its planner keeps the bytes in flight (four 8 KiB stages where two 16 KiB ones were);
# f16s3 / f16s2: the same kernels with the planner's stage bytes cut to 24 / 16 KiB (KDA_STEP_STAGE_BYTES and
# KDA_STEP_STAGE_BYTES_MORE). benchmarks/ladder/build_variants.sh with every Wide fp32 q = 1 instantiation (and the
# bf16 narrow one, whose chunks and stages changed after build/gpu was built) compiled against a copy of include/
# patched with the diff, linked ahead of build/gpu's library as it is (NO_NINJA: its other kernels are the tree's);
# kda_bench_tree is build/gpu's (its fp32 kernels are the tree's). Output: .gpuG/binG.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuG
NO_NINJA=1 PATCH=docs/data/ladder_s60/prepared/rung_f16.diff TARGET="kda_bench kda_cuda_tests" \
  INST="step_split1_f32_q1 step_split1_f32_q1_keep step_split1_f32_q1_nofb step_split1_f32_q1_nofb_keep step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1_nofb_narrow" \
  benchmarks/ladder/build_variants.sh $W/bin f16= \
  f16s3="-DKDA_STEP_STAGE_BYTES=24576 -DKDA_STEP_STAGE_BYTES_MORE=24576" \
  f16s2="-DKDA_STEP_STAGE_BYTES=16384 -DKDA_STEP_STAGE_BYTES_MORE=16384"
rm -f $W/bin/kda_cuda_tests_f16s3 $W/bin/kda_cuda_tests_f16s2
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree
tar cf - -C $W bin | xz -T2 -6 > .gpuG/binG.tar.xz
ls -la .gpuG
