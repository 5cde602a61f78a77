#!/bin/bash
# Build of call X (session 61): session 60's three prepared calls (F, G, H) in one. Their binaries (built by
# docs/data/ladder_s60/prepared/build_{F,G,H}.sh) in one archive: F's tree and s2, G's f16 / f16s3 / f16s2, H's l1.
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
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuX/binX.tar.xz
rm -rf $W
ls -la .gpuX
