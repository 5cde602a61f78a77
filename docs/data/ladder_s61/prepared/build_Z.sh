#!/bin/bash
# Build of call Z (session 61): rungs zd and zl (rung_z.diff) against the tree, and the tree's own sanitizer matrix.
# zd (-DKDA_RUNG_ZD): a Wide step in gate mode 1 drops its items' logit lines from L2 once read (discard.global.L2:
# no write-back; the next step's gate kernel writes them again after its wait on this grid). zl (-DKDA_RUNG_ZD
# -DKDA_RUNG_ZL): zd, and the gate kernel stores the logits of step rows with an L2 evict-last policy (through the
# warp's piece of the staged F_B, free by then), so that they are still in L2 when the step reads them. Together: the
# gate workspace's 512 bytes an item neither written back nor read from DRAM. The gate kernel and every Split 1
# q = 1 instantiation compiled against a copy of include/ patched with the diff, linked ahead of build/gpu (the tree's
# build; kda_bench_tree and kda_tests are build/gpu's). Output: .gpuZ/binZ.tar.xz. (The carried archive was built at
# 7b22654; built at a later tree, the -lineinfo objects may schedule differently: without line info the SASS is the
# same.)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuZ
NO_NINJA=1 PATCH=docs/data/ladder_s61/prepared/rung_z.diff TARGET="kda_bench kda_cuda_tests" \
  INST="gate step_split1_f32_q1 step_split1_f32_q1_keep step_split1_f32_q1_nofb step_split1_f32_q1_nofb_keep step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1 step_split1_bf16_q1_nofb_narrow step_split1_bf16_q1_nofb_occ6 step_split1_bf16_q1_nofb_occ6_drop" \
  benchmarks/ladder/build_variants.sh $W/bin zd="-DKDA_RUNG_ZD" zl="-DKDA_RUNG_ZD -DKDA_RUNG_ZL"
rm -f $W/bin/kda_cuda_tests_zd
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree && cp build/gpu/tests/cpp/kda_tests $W/bin/kda_tests
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuZ/binZ.tar.xz
rm -rf $W
ls -la .gpuZ
