#!/bin/bash
# Build of call ZB: the tree (rung zh landed: the logits kept evict-last up to half the L2) — kda_bench, rows_prepared
# (the own-bytes bounds: `--io`, `--bf16`), kda_cuda_tests and kda_tests (the sanitizer matrix), sm_90a; kda_bench
# again as kda_bench_tree, and kda_bench_pre: .gpuZ's kda_bench_tree (session 62's call Z, built at b318c97: the tree
# before the logits rule, ff0468b; no kernel of fp32 append changed between session 55 and it); kda_bench_na: the
# tree's planner with rung_na.diff (append steps keep no logits in L2; PLAN=, so NO_NINJA links build/gpu as is).
# Output: .gpuZB/binZB.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
cmake --build build/gpu --target kda_bench rows_prepared kda_cuda_tests kda_tests -j2
W=$(mktemp -d); mkdir -p $W/bin .gpuZB
cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared $W/bin/
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests $W/bin/
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree
tar xJf .gpuZ/binZ.tar.xz -C $W bin/kda_bench_tree -O > $W/bin/kda_bench_pre && chmod +x $W/bin/kda_bench_pre
P=docs/data/ladder_s64/prepared
cp src/plan/plan.cpp $W/plan_na.cpp && (cd $W && patch -s -p2 plan_na.cpp) < $P/rung_na.diff
NO_NINJA=1 PLAN=$W/plan_na.cpp benchmarks/ladder/build_variants.sh $W/bin na=""
git rev-parse --short HEAD > $W/bin/commit.txt
git diff --quiet HEAD -- include src || echo "+ working tree changes" >> $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuZB/binZB.tar.xz
rm -rf $W
grep -q '^.gpuZB/' .git/info/exclude 2>/dev/null || echo '.gpuZB/' >> .git/info/exclude
ls -la .gpuZB
