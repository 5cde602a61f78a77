#!/bin/bash
# Build of session 69's call B: the tree's kda_cuda_tests and kda_tests (sm_90a) from build/gpu, brought up to date
# first. Output: .gpuS69/binB.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
git diff --quiet HEAD -- include src tests || { echo "build_B: include/, src/ or tests/ differ from HEAD" >&2; exit 2; }
cmake --build build/gpu --target kda_cuda_tests kda_tests -j2
W=$(mktemp -d); mkdir -p $W/bin .gpuS69
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests $W/bin/
git rev-parse --short HEAD > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS69/binB.tar.xz
rm -rf $W
ls -la .gpuS69
