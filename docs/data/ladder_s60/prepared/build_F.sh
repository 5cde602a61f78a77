#!/bin/bash
# Build of call F (session 60, not yet run): this tree's narrow form (16-row chunks, three stages: `tree`) and rung s2
# (two stages, -DKDA_STEP_NARROW_STAGES=2): the narrow instantiation and the planner compiled from the tree (with the
# rung's definition) through benchmarks/ladder/build_variants.sh with NO_NINJA=1, linked ahead of build/gpu's library
# (built before the narrow form's chunks and stages changed; its other kernels are the tree's). Output: .gpuF/binF.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuF
NO_NINJA=1 TARGET="kda_bench kda_cuda_tests" INST=step_split1_bf16_q1_nofb_narrow \
  benchmarks/ladder/build_variants.sh $W/bin tree= s2="-DKDA_STEP_NARROW_STAGES=2"
tar cf - -C $W bin | xz -T2 -6 > .gpuF/binF.tar.xz
ls -la .gpuF
