#!/bin/bash
# Build of session 68's call D: rungs on the five-CTA fp32 q = 1 kernel (fp32 append at Qr = 12-16): q3 (-DKDA_RUNG_P=3:
# k·q handed over by warp 0 and the (H, B) grid, as rung p3 of call B), u4 (-DKDA_RUNG_FOLD_UNROLL: the fold loop
# unrolled by four records, 37 instructions a record and chunk against 39, no spills at 48 registers), q3u4 (both),
# beside the tree (build/gpu). rung_p.diff applied for the build and taken out after it. Output: .gpuS68/binD.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuS68
git apply docs/data/ladder_s68/prepared/rung_p.diff
trap 'git apply -R docs/data/ladder_s68/prepared/rung_p.diff' EXIT
NO_NINJA=1 INST=step_split1_f32_q1_nofb_occ5 benchmarks/ladder/build_variants.sh $W/bin \
  q3="-DKDA_RUNG_P=3" u4="-DKDA_RUNG_FOLD_UNROLL=4" q3u4="-DKDA_RUNG_P=3 -DKDA_RUNG_FOLD_UNROLL=4"
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree
for n in tree q3 u4 q3u4; do ln $W/bin/kda_bench_$n $W/bin/kda_bench_${n}88; done
{ git rev-parse --short HEAD; echo "+ kda_bench --stagger; the rungs' macros (rung_p.diff)"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS68/binD.tar.xz
rm -rf $W
ls -la .gpuS68
