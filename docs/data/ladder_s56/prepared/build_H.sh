#!/usr/bin/env bash
# Builds .gpuH for callH.sh: the tree's kda_bench as tree, on and off (run with --narrow off / on), session 55's
# product as s55 (build_E.sh's head), and the tree's kda_cuda_tests and kda_tests.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench kda_cuda_tests kda_tests >/dev/null
rm -rf /tmp/binH && mkdir -p /tmp/binH/bin
for n in tree on off; do cp build/gpu/benchmarks/kda_bench /tmp/binH/bin/kda_bench_$n; done
cp /tmp/binE/bin/kda_bench_head /tmp/binH/bin/kda_bench_s55
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests /tmp/binH/bin/
mkdir -p .gpuH && tar cf - -C /tmp/binH bin | xz -T2 -6 > .gpuH/binH.tar.xz
grep -q '^.gpuH/' .git/info/exclude 2>/dev/null || echo '.gpuH/' >> .git/info/exclude
