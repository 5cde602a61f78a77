#!/bin/bash
# Build of call ZR (run 2): the tree with call ZP's product and its L2 rule (zr, landed as ff0468b: the logits kept
# evict-last up to a third of the L2, dropped by a Wide step always) as build/gpu holds it (brought up to date here):
# kda_bench, kda_cuda_tests, kda_tests. The tree of call ZP and its product (zp) come from .gpuZP
# (../../ladder_s61/prepared/build_ZP.sh). Output: .gpuZR/binZR.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
cmake --build build/gpu --target kda_bench kda_cuda_tests kda_tests -j2
W=$(mktemp -d); mkdir -p $W/bin .gpuZR
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_zr
cp build/gpu/tests/cpp/kda_cuda_tests $W/bin/kda_cuda_tests_zr
cp build/gpu/tests/cpp/kda_tests $W/bin/kda_tests_zr
{ git rev-parse --short HEAD; git status --short -- include src tests; } > $W/bin/commit_zr.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuZR/binZR.tar.xz
rm -rf $W
ls -la .gpuZR
