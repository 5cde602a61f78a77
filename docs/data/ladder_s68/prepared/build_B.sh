#!/bin/bash
# Build of session 68's call B: rungs p1 (warp 0 alone forms k·q of the lean vectors and hands it over with them), p2
# (Wide's grid laid out (H, B): the item without a division), p4 (thread 0 alone resolves the request and hands it over
# in shared memory), p8 (a stage's refill waits, in warp 0 alone, on an mbarrier every thread arrives on once it has
# read the stage, instead of a CTA barrier), p3 = p1 + p2, p6 = p2 + p4, p7 = p1 + p2 + p4, p15 = all four; each the fp32 q = 1 six-CTA kernel compiled
# with -DKDA_RUNG_P=N (include/kda/cuda/step_kernel.cuh, src/cuda/step_launch.cuh), beside the tree (build/gpu), under
# the names the ladder gives its --sms 88 lines too. Output: .gpuS68/binB.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuS68
# the rungs' macros (rung_p.diff: include/kda/cuda/step_kernel.cuh, src/cuda/step_launch.cuh; off by default), applied
# for the build and taken out after it
git apply docs/data/ladder_s68/prepared/rung_p.diff
trap 'git apply -R docs/data/ladder_s68/prepared/rung_p.diff' EXIT
NO_NINJA=1 INST=step_split1_f32_q1_nofb_occ6 benchmarks/ladder/build_variants.sh $W/bin \
  p1="-DKDA_RUNG_P=1" p2="-DKDA_RUNG_P=2" p3="-DKDA_RUNG_P=3" p4="-DKDA_RUNG_P=4" p6="-DKDA_RUNG_P=6" p7="-DKDA_RUNG_P=7" p8="-DKDA_RUNG_P=8" \
  p15="-DKDA_RUNG_P=15"
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree
for n in tree p1 p2 p3 p4 p6 p7 p8 p15; do ln $W/bin/kda_bench_$n $W/bin/kda_bench_${n}88; done
{ git rev-parse --short HEAD; git diff --quiet HEAD -- include src benchmarks || echo "+ working tree changes (the rungs' macros)"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS68/binB.tar.xz
rm -rf $W
grep -q '^.gpuS68/' .git/info/exclude 2>/dev/null || echo '.gpuS68/' >> .git/info/exclude
ls -la .gpuS68
# and rung p15's GPU test, .gpuS68/binT.tar.xz:
#   TARGET=kda_cuda_tests NO_NINJA=1 INST=step_split1_f32_q1_nofb_occ6 benchmarks/ladder/build_variants.sh T p15="-DKDA_RUNG_P=15"
