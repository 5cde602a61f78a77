#!/bin/bash
# Build of call H (prepared in session 60, not yet run): rung l1 (rung_l1.diff), the narrow form issuing only its first
# state stage with the window loads and the other two after the staged-inputs barrier: fewer state bytes queued ahead
# of the item's first-wave loads (the lesson of its three stages). `tree` and `l1`: the narrow instantiation (and the
# planner) compiled from this tree and from a copy of include/ patched with the diff, through
# benchmarks/ladder/build_variants.sh with NO_NINJA=1 (build/gpu's other kernels are the tree's). Output: .gpuH/binH.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
W=$(mktemp -d); mkdir -p $W/bin .gpuH
cp -r include $W/include && (cd $W && patch -s -p1 < "$OLDPWD/docs/data/ladder_s60/prepared/rung_l1.diff")
export NO_NINJA=1 TARGET="kda_bench kda_cuda_tests" INST=step_split1_bf16_q1_nofb_narrow
benchmarks/ladder/build_variants.sh $W/bin tree=
INCLUDE=$W/include benchmarks/ladder/build_variants.sh $W/bin l1=
tar cf - -C $W bin | xz -T2 -6 > .gpuH/binH.tar.xz
ls -la .gpuH
