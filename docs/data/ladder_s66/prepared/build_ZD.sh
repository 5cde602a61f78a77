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
git rev-parse --short HEAD > $W/bin/commit.txt
git diff --quiet HEAD -- include src benchmarks || echo "+ working tree changes" >> $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuZD/binZD.tar.xz
rm -rf $W
grep -q '^.gpuZD/' /work/main/.git/info/exclude 2>/dev/null || echo '.gpuZD/' >> /work/main/.git/info/exclude
ls -la .gpuZD
