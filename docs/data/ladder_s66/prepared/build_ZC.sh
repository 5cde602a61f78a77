#!/bin/bash
# Build of call ZC's rung (session 66): f16a = session 60's rung f16 (../../ladder_s60/prepared/rung_f16.diff: Wide
# fp32 q = 1 in 16-row chunks, two rows a warp; the planner keeps the same bytes in flight: four 8 KiB stages where
# decode had two 16 KiB ones, two where fp32 append at six CTAs per SM had one) at the tree, for fp32 decode and
# append on an H200. On an H100 (ladder_s61/run1) it tied decode and lost append by 2.4-2.6%, where append already runs
# within 2% of its floor; on the H200 append runs 1.2 x its floor, and one 16 KiB stage per CTA cannot overlap a
# chunk's load with the fold of the one before. kda_bench only (timing; its GPU tests passed in session 61).
# benchmarks/ladder/build_variants.sh with every Wide fp32 q = 1 instantiation compiled against include/ patched with
# the diff, linked ahead of build/gpu's library as it is (at the tree). Output: .gpuZC/binZC.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuZC
NO_NINJA=1 PATCH=docs/data/ladder_s60/prepared/rung_f16.diff TARGET=kda_bench \
  INST="step_split1_f32_q1 step_split1_f32_q1_keep step_split1_f32_q1_nofb step_split1_f32_q1_nofb_keep step_split1_f32_q1_nofb_occ6" \
  benchmarks/ladder/build_variants.sh $W/bin f16a=
# a4: the tree's kernels, its planner with fp32 append at four CTAs per SM (two 16 KiB stages each) instead of six (one
# each): session 37's H200 measure (six 1.9-2.6% faster at H = 96, B = 64 / 256) again on the H200's slower append.
NO_NINJA=1 benchmarks/ladder/build_variants.sh $W/bin a4="-DKDA_STEP_F32_APPEND_CTAS_PER_SM=4"
git rev-parse --short HEAD > $W/bin/commit_f16a.txt
tar cf - -C $W bin | xz -T2 -6 > .gpuZC/binZC.tar.xz
rm -rf $W
grep -q '^.gpuZC/' .git/info/exclude 2>/dev/null || echo '.gpuZC/' >> .git/info/exclude
ls -la .gpuZC
