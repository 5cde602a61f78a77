#!/bin/bash
# Build of session 68's call W (prepared, not run): rung wpf, the first wave's window lines and x of an item prefetched
# once its slot is loaded, before the request's pending count comes back (rung_p.diff, KDA_RUNG_WPF; every thread of the
# first wave, its own channels: three window columns and x), so that the window loads after the request hit the cache
# and the conv leaves the item's chain (today: slot -> pending -> window / records / first chunk -> conv -> rows). w1
# into L1, w2 into L2; the fp32 q = 1 six- and five-CTA kernels (append Qr <= 11 and 12-16) compiled again, beside the
# tree (build/gpu), as kda_bench_* and kda_cuda_tests_* (the append tests on the rungs). Output: .gpuS68/binW.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuS68
git apply docs/data/ladder_s68/prepared/rung_p.diff
trap 'git apply -R docs/data/ladder_s68/prepared/rung_p.diff' EXIT
TARGET="kda_bench kda_cuda_tests" NO_NINJA=1 INST="step_split1_f32_q1_nofb_occ6 step_split1_f32_q1_nofb_occ5" \
  benchmarks/ladder/build_variants.sh $W/bin w1="-DKDA_RUNG_WPF=1" w2="-DKDA_RUNG_WPF=2"
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree
for n in tree w1 w2; do ln $W/bin/kda_bench_$n $W/bin/kda_bench_${n}88; done
{ git rev-parse --short HEAD; echo "+ the rungs' macros (rung_p.diff)"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS68/binW.tar.xz
rm -rf $W
ls -la .gpuS68
