#!/usr/bin/env bash
# Builds .gpuD for callD.sh: the tree's kda_bench (tree: the narrow form), kda_cuda_tests and kda_tests, and
# kda_bench_base of build_C.sh (head: knob 0, the tree before the narrow form) as head.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench kda_cuda_tests kda_tests >/dev/null
rm -rf /tmp/binD && mkdir -p /tmp/binD/bin
cp build/gpu/benchmarks/kda_bench /tmp/binD/bin/kda_bench_tree
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests /tmp/binD/bin/
cp /tmp/binC/bin/kda_bench_base /tmp/binD/bin/kda_bench_head
mkdir -p .gpuD && tar cf - -C /tmp/binD bin | xz -T2 -6 > .gpuD/binD.tar.xz
grep -q '^.gpuD/' .git/info/exclude 2>/dev/null || echo '.gpuD/' >> .git/info/exclude
