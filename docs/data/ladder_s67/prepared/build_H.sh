#!/bin/bash
# Build of session 67's call H: rung h5, the working tree (heuristics::step_layout tries every count of CTAs per SM
# below the preferred one, so fp32 append at Qr = 12-16, whose records fit five CTAs but not six, runs five on the fp32
# q = 1 kernel compiled for five, SASS-identical to rung a5's, instead of four on the four-CTA kernel; Qr <= 11 keeps
# six) as kda_bench_h5 / h588, beside session 66's tree (67d2999: tree, tree88) and rung a5 (the six-CTA kernel
# compiled for five, append at five for every Qr: a5, a588) from .gpuZD; the working tree's C++ GPU tests
# (kda_cuda_tests, kda_tests). Output: .gpuS67/binH.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
cmake --build build/gpu --target kda_bench kda_cuda_tests kda_tests -j2
W=$(mktemp -d); mkdir -p .gpuS67
tar xJf .gpuZD/binZD.tar.xz -C $W
(cd $W/bin && rm -f kda_bench_tree66 kda_bench_f16a88 kda_bench_a488 rows_prepared kda_bench)
for n in h5 h588; do cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_$n; done
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests $W/bin/
{ git rev-parse --short HEAD; git diff --quiet HEAD -- include src benchmarks || echo "+ working tree changes"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS67/binH.tar.xz
rm -rf $W
grep -q '^.gpuS67/' .git/info/exclude 2>/dev/null || echo '.gpuS67/' >> .git/info/exclude
ls -la .gpuS67
