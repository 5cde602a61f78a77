#!/bin/bash
# Build of session 70's call 1: the tree's kda_bench (also as kda_bench_tree, the name the targets ladder uses) and
# rows_prepared (sm_90a) from build/gpu, brought up to date first. Output: .gpuS70/binT.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
git diff --quiet HEAD -- include src benchmarks || { echo "build_T: include/, src/ or benchmarks/ differ from HEAD" >&2; exit 2; }
cmake --build build/gpu --target kda_bench rows_prepared -j2
W=$(mktemp -d); mkdir -p $W/bin .gpuS70
cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared $W/bin/
ln $W/bin/kda_bench $W/bin/kda_bench_tree
git rev-parse --short HEAD > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS70/binT.tar.xz
rm -rf $W
ls -la .gpuS70
