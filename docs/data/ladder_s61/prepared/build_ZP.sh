#!/bin/bash
# Build of call ZP: the product form of rung zl (product_zl.diff: the gate kernel's evict-last stores of the logits,
# a Wide step's drop of them once read, in every Split 1 form) against the tree. The gate kernel and every Split 1
# instantiation are compiled against a copy of include/ patched with the diff and linked ahead of build/gpu (the
# tree's build, at the tree's commit), for kda_bench, kda_cuda_tests and kda_tests (the sanitizer matrix); the tree's
# kda_bench beside them. Output: .gpuZP/binZP.tar.xz (about 4 minutes on two cores).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuZP
INST="gate $(ls src/cuda/inst | grep '^step_split1_' | sed 's/\.cu$//' | tr '\n' ' ')"
NO_NINJA=1 PATCH=docs/data/ladder_s61/prepared/product_zl.diff TARGET="kda_bench kda_cuda_tests kda_tests" INST="$INST" \
  benchmarks/ladder/build_variants.sh $W/bin zp=""
# zpb, a planted bug (plant_early_drop.diff: the product with the q = 1 and q-token paths dropping the logits right
# after the late wait, before they are read): its gate mode 1 tests must fail
NO_NINJA=1 PATCH=docs/data/ladder_s61/prepared/plant_early_drop.diff TARGET="kda_cuda_tests" \
  INST="gate step_split1_f32_q1 step_split1_f32_q1_keep step_split1_f32_q1_nofb step_split1_f32_q1_nofb_keep step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1 step_split1_bf16_q1_nofb_narrow step_split1_bf16_q1_nofb_occ6 step_split1_bf16_q1_nofb_occ6_drop step_split1_f32_q4_nofb step_split1_f32_qn_nofb" \
  benchmarks/ladder/build_variants.sh $W/bin zpb=""
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree
git rev-parse --short HEAD > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuZP/binZP.tar.xz
rm -rf $W
ls -la .gpuZP
