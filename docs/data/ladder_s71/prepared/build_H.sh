#!/bin/bash
# Build of session 71's call H (about 10 minutes on two cores), from a checkout whose include/, src/, tests/ and
# benchmarks/ are HEAD's: rung fd1 (fd1_tree.diff: session 70's fd with the q = 1 fold not unrolled for fp32 state
# either; fd lost 0.5-1.3% at fp32 append Qr = 12-16 on 88 SMs, ladder_s71/run1) applied for the build and taken out
# after it: kda_bench_fd1, kda_cuda_tests, kda_tests, and its wheel in .kdawhl71. call H takes `old` and `fd` (session
# 70's fd_tree.diff) from .gpuS70/binG.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
P=docs/data/ladder_s71/prepared
git diff --quiet HEAD -- include src tests benchmarks || { echo "build_H: the tree differs from HEAD" >&2; exit 2; }
W=$(mktemp -d); mkdir -p $W/bin .gpuS71
git apply $P/fd1_tree.diff
trap "git apply -R $P/fd1_tree.diff" EXIT
cmake --build build/gpu --target kda_bench kda_cuda_tests kda_tests -j2
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_fd1
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests $W/bin/
ln $W/bin/kda_bench_fd1 $W/bin/kda_bench_fd188
rm -rf .kdawhl71 && KDA_CUDA_ARCHS=90a python3.12 -m pip wheel -q --no-deps -w .kdawhl71 .
echo "fd1: $(git rev-parse --short HEAD) + ladder_s71/prepared/fd1_tree.diff" > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS71/binH.tar.xz
rm -rf $W
ls -la .gpuS71 .kdawhl71
