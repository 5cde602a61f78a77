#!/usr/bin/env bash
# Builds .gpuT for callT.sh: the tree's kda_bench and rows_prepared (with the rungs moveio / rowsio, `--io`).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench rows_prepared
rm -rf /tmp/binT && mkdir -p /tmp/binT/bin && cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared /tmp/binT/bin/
mkdir -p .gpuT && tar cf - -C /tmp/binT bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuT/binT.tar.xz
grep -q '^.gpuT/' .git/info/exclude 2>/dev/null || echo '.gpuT/' >> .git/info/exclude
