#!/usr/bin/env bash
# Builds .gpuX for callX.sh: the tree's kda_bench, the rung c3s4 (every fp32 chunk in flight at three CTAs per SM for
# decode without the F_B slice from 6144 CTAs: -DKDA_STEP_ALL_CHUNKS_MIN_CTAS=6144; c3s4m from 3072) and its GPU tests with the layout
# from 265 CTAs (c3s4t), so that the test matrix's grids run it.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
# the knob KDA_STEP_ALL_CHUNKS_MIN_CTAS (heuristics::step_all_chunks) is not in the tree (c3s4 tied, run 8): applied
# for the build and taken back after it
git apply docs/data/ladder_s55/prepared/rung_c3s4.diff
trap 'git apply -R docs/data/ladder_s55/prepared/rung_c3s4.diff' EXIT
rm -rf /tmp/binX && mkdir -p /tmp/binX/bin
TARGET=kda_bench benchmarks/ladder/build_variants.sh /tmp/binX/bin c3s4="-DKDA_STEP_ALL_CHUNKS_MIN_CTAS=6144" \
  c3s4m="-DKDA_STEP_ALL_CHUNKS_MIN_CTAS=3072"
TARGET=kda_cuda_tests benchmarks/ladder/build_variants.sh /tmp/binX/bin c3s4t="-DKDA_STEP_ALL_CHUNKS_MIN_CTAS=265"
cp build/gpu/benchmarks/kda_bench /tmp/binX/bin/
mkdir -p .gpuX && tar cf - -C /tmp/binX bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuX/binX.tar.xz
grep -q '^.gpuX/' .git/info/exclude 2>/dev/null || echo '.gpuX/' >> .git/info/exclude
