#!/bin/bash
# Build of session 70's call G: the tree with rung fd landed (its kda_bench as kda_bench_new, kda_cuda_tests,
# kda_tests, from build/gpu, brought up to date first) beside the tree before it (call 1's .gpuS70/binT.tar.xz, built
# at 305b0d2: kda_bench_old), and the planted bugs' kda_cuda_tests_pl1 / _pl2 of call F (.gpuS70/binF.tar.xz).
# Output: .gpuS70/binG.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
git diff --quiet HEAD -- include src tests benchmarks || { echo "build_G: the tree differs from HEAD" >&2; exit 2; }
cmake --build build/gpu --target kda_bench kda_cuda_tests kda_tests -j2
W=$(mktemp -d); mkdir -p $W/bin $W/t $W/f
tar xJf .gpuS70/binT.tar.xz -C $W/t && tar xJf .gpuS70/binF.tar.xz -C $W/f
cp $W/t/bin/kda_bench $W/bin/kda_bench_old && cp $W/f/bin/kda_cuda_tests_pl1 $W/f/bin/kda_cuda_tests_pl2 $W/bin/
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_new
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests $W/bin/
for n in old new; do ln $W/bin/kda_bench_$n $W/bin/kda_bench_${n}88; done
ln $W/bin/kda_bench_new $W/bin/kda_bench_tree  # (the targets ladder's name)
cp build/gpu/benchmarks/rows_prepared $W/bin/
{ git rev-parse --short HEAD; echo "old: $(cat $W/t/bin/commit.txt); pl1, pl2: $(head -1 $W/f/bin/commit.txt) + plant_s70.diff"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS70/binG.tar.xz
rm -rf $W
ls -la .gpuS70
