#!/usr/bin/env bash
# Builds .gpuY for callY.sh: the tree's kda_bench, the rungs c3s4 / c3s4m (every fp32 chunk in flight at three CTAs
# per SM for decode without the F_B slice from 6144 / 3072 CTAs) and rows_prepared (with rows16io, `--bf16`).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
# the knob KDA_STEP_ALL_CHUNKS_MIN_CTAS (heuristics::step_all_chunks) is not in the tree (c3s4 tied, run 8): applied
# for the build and taken back after it
git apply docs/data/ladder_s55/prepared/rung_c3s4.diff
trap 'git apply -R docs/data/ladder_s55/prepared/rung_c3s4.diff' EXIT
rm -rf /tmp/binY && mkdir -p /tmp/binY/bin
TARGET=kda_bench benchmarks/ladder/build_variants.sh /tmp/binY/bin c3s4="-DKDA_STEP_ALL_CHUNKS_MIN_CTAS=6144" \
  c3s4m="-DKDA_STEP_ALL_CHUNKS_MIN_CTAS=3072"
ninja -C build/gpu rows_prepared
cp build/gpu/benchmarks/kda_bench build/gpu/benchmarks/rows_prepared /tmp/binY/bin/
mkdir -p .gpuY && tar cf - -C /tmp/binY bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuY/binY.tar.xz
grep -q '^.gpuY/' .git/info/exclude 2>/dev/null || echo '.gpuY/' >> .git/info/exclude
