#!/bin/bash
# Build of session 71's call N (about 10 minutes on two cores), from build/gpu brought up to date at HEAD: the tree's
# kda_bench (also as kda_bench_tree, the targets ladder's name), rows_prepared, kda_cuda_tests and kda_tests (sm_90a)
# in .gpuS71/binN.tar.xz, and the tree's wheel in .kdawhl71n.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
git diff --quiet HEAD -- include src tests benchmarks python csrc || { echo "build_N: the tree differs from HEAD" >&2; exit 2; }
cmake --build build/gpu --target kda_bench rows_prepared kda_cuda_tests kda_tests -j2
W=$(mktemp -d); mkdir -p $W/bin .gpuS71
cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared $W/bin/
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests $W/bin/
ln $W/bin/kda_bench $W/bin/kda_bench_tree
git rev-parse --short HEAD > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS71/binN.tar.xz
rm -rf $W .kdawhl71n && KDA_CUDA_ARCHS=90a python3.12 -m pip wheel -q --no-deps -w .kdawhl71n .
ls -la .gpuS71 .kdawhl71n
