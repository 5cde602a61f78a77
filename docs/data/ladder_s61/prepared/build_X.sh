#!/bin/bash
# Build of call X (session 61): session 60's three prepared calls (F, G, H) in one. Their binaries (built by
# docs/data/ladder_s60/prepared/build_{F,G,H}.sh) in one archive: F's tree and s2, G's f16 / f16s3 / f16s2, H's l1;
# and rung n8 (the narrow form in 8-row chunks, two rows a warp: -DKDA_STEP_NARROW_CHUNK_ROWS=8 against a copy of
# include/ whose chunk-rows assertion admits 8), with three stages (n8, 6 KiB in flight a CTA) and four (n8s4, 8 KiB).
# Rungs differ from the tree only in a few kernels, so one LZMA dictionary larger than a binary stores them about once
# (~4 MB for ten binaries, against ~46 MB as three archives). Output: .gpuX/binX.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/F $W/G $W/H $W/bin .gpuX
for c in F G H; do
  [[ -f .gpu$c/bin$c.tar.xz ]] || bash docs/data/ladder_s60/prepared/build_$c.sh
  tar xJf .gpu$c/bin$c.tar.xz -C $W/$c
done
cp $W/F/bin/* $W/bin/ && cp $W/G/bin/*f16* $W/bin/ && cp $W/H/bin/*l1 $W/bin/
cp -r include $W/include
sed -i 's/static_assert(kNarrowChunkRows == 16 ||/static_assert(kNarrowChunkRows == 8 || kNarrowChunkRows == 16 ||/' \
  $W/include/kda/cuda/config.h
NO_NINJA=1 INCLUDE=$W/include TARGET="kda_bench kda_cuda_tests" INST=step_split1_bf16_q1_nofb_narrow \
  benchmarks/ladder/build_variants.sh $W/bin n8="-DKDA_STEP_NARROW_CHUNK_ROWS=8" \
  n8s4="-DKDA_STEP_NARROW_CHUNK_ROWS=8 -DKDA_STEP_NARROW_STAGES=4"
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuX/binX.tar.xz
rm -rf $W
ls -la .gpuX
