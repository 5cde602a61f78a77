#!/bin/bash
# Build of call ZH: rung zh (rung_zh.diff of include/: the logits kept evict-last up to half the L2, and a Wide step
# drops them only where they were kept) against the tree (the landed form: a third of the L2, the drop always). The
# gate kernel and every Split 1 instantiation and the planner are compiled against a copy of include/ patched with the
# diff and linked ahead of build/gpu (brought up to date first, at the tree's commit): kda_bench and kda_cuda_tests;
# the tree's kda_bench beside them. Output: .gpuZH/binZH.tar.xz (about 4 minutes on two cores).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
cmake --build build/gpu --target kda_bench kda_cuda_tests -j2
W=$(mktemp -d); mkdir -p $W/bin .gpuZH
INST="gate $(ls src/cuda/inst | grep '^step_split1_' | sed 's/\.cu$//' | tr '\n' ' ')"
NO_NINJA=1 PATCH=docs/data/ladder_s63/prepared/rung_zh.diff TARGET="kda_bench kda_cuda_tests" INST="$INST" \
  benchmarks/ladder/build_variants.sh $W/bin zh=""
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_tree
git rev-parse --short HEAD > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuZH/binZH.tar.xz
rm -rf $W
ls -la .gpuZH
