#!/bin/bash
# Build of session 69's call A: rungs sbp (the first stages' state copies issued once the item's slot is known, before
# the pending count's round trip: rung_s69.diff, KDA_RUNG_SBP), wpf (session 68's prefetch of the window lines and x
# into L1, KDA_RUNG_WPF=1) and both (sw1), on the fp32 q = 1 six- and five-CTA kernels (append Qr <= 11 and 12-16),
# beside the tree compiled the same way, as kda_bench_* and kda_cuda_tests_*; the tree's kda_bench and rows_prepared
# (the H200's targets grid and decode bounds). Output: .gpuS69/binA.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuS69
git apply docs/data/ladder_s69/prepared/rung_s69.diff
trap 'git apply -R docs/data/ladder_s69/prepared/rung_s69.diff' EXIT
cmake --build build/gpu --target kda_bench rows_prepared kda_cuda_tests -j2
TARGET="kda_bench kda_cuda_tests" NO_NINJA=1 INST="step_split1_f32_q1_nofb_occ6 step_split1_f32_q1_nofb_occ5" \
  benchmarks/ladder/build_variants.sh $W/bin tree="" sbp="-DKDA_RUNG_SBP" sw1="-DKDA_RUNG_SBP -DKDA_RUNG_WPF=1" \
  w1="-DKDA_RUNG_WPF=1"
rm $W/bin/kda_cuda_tests_w1
cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared $W/bin/
for n in tree sbp sw1 w1; do ln $W/bin/kda_bench_$n $W/bin/kda_bench_${n}88; done
{ git rev-parse --short HEAD; echo "+ the rungs' macros (rung_s69.diff)"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS69/binA.tar.xz
rm -rf $W
ls -la .gpuS69
