#!/usr/bin/env bash
# Builds .gpuW for callW.sh: the tree's kda_bench and rows_prepared (rungs rowsio, moveio, rowsio/1; `--io`).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench rows_prepared
rm -rf /tmp/binW && mkdir -p /tmp/binW/bin && cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared /tmp/binW/bin/
mkdir -p .gpuW && tar cf - -C /tmp/binW bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuW/binW.tar.xz
grep -q '^.gpuW/' .git/info/exclude 2>/dev/null || echo '.gpuW/' >> .git/info/exclude
