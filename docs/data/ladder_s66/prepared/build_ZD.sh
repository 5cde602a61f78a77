#!/bin/bash
# Build of call ZD (session 66): the H200's DRAM bandwidth per SM on an H100 (kda_bench --sms: the steps on a green
# context of 88 of the 132 SMs, 3.35 TB/s / 88 = 38 GB/s per SM against the H200's 4.8 TB/s / 132 = 36). kda_bench at the
# tree (build/gpu, with --sms) as kda_bench_tree and under the names the ladder gives its --sms lines (tree88, tree66);
# .gpuZC's rungs f16a and a4 (build_ZC.sh, built after --sms) as f16a88 and a488; kda_bench and rows_prepared under
# their own names for call ZG's bounds (benchmarks/ladder/bounds_verdict.py reads those names). Output:
# .gpuZD/binZD.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
cmake --build build/gpu --target kda_bench rows_prepared -j2
W=$(mktemp -d); mkdir -p $W/bin .gpuZD
for n in tree tree88 tree66; do cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_$n; done
cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared $W/bin/
tar xJf .gpuZC/binZC.tar.xz -C $W
mv $W/bin/kda_bench_f16a $W/bin/kda_bench_f16a88 && mv $W/bin/kda_bench_a4 $W/bin/kda_bench_a488
# rung a5 (rung_a5.diff): the fp32 q = 1 six-CTA kernel compiled for five CTAs per SM (48 registers, no spills, where
# six allow 40 and spill 16 bytes) and fp32 append laid out at five (Qr = 16 too: its records fit five), as a5 and a588
NO_NINJA=1 PATCH=docs/data/ladder_s66/prepared/rung_a5.diff INST=step_split1_f32_q1_nofb_occ6 \
  benchmarks/ladder/build_variants.sh $W/bin a5="-DKDA_RUNG_F32_OCC6_BOUND=5 -DKDA_STEP_F32_APPEND_CTAS_PER_SM=5"
cp $W/bin/kda_bench_a5 $W/bin/kda_bench_a588
git rev-parse --short HEAD > $W/bin/commit.txt
git diff --quiet HEAD -- include src benchmarks || echo "+ working tree changes" >> $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuZD/binZD.tar.xz
rm -rf $W
grep -q '^.gpuZD/' .git/info/exclude 2>/dev/null || echo '.gpuZD/' >> .git/info/exclude
ls -la .gpuZD
