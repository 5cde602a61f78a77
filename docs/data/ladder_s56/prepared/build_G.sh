#!/usr/bin/env bash
# Builds .gpuG for callG.sh: the tree's kda_bench as tree (Policy::narrow 'auto') and off (run with --narrow off: the
# six-CTA form, with its conv as two tests), and session 55's product (build_E.sh's head: the planner without the
# narrow form, the six-CTA kernel as it was) as s55. (Runs 7, 11, 12 carried an earlier build: the narrow form in
# 16-row chunks as tree, and rung_n32.diff's 32-row chunks, which the tree took after run 8, as n32.) And vf: the narrow
# form with its v conv before the q / k conv (rung_vf.diff; INC: a copy of include/ with it), kda_bench and its tests.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench >/dev/null
rm -rf /tmp/binG && mkdir -p /tmp/binG/bin
cp build/gpu/benchmarks/kda_bench /tmp/binG/bin/kda_bench_tree
cp build/gpu/benchmarks/kda_bench /tmp/binG/bin/kda_bench_off
cp /tmp/binE/bin/kda_bench_head /tmp/binG/bin/kda_bench_s55
TARGET="kda_bench kda_cuda_tests" INST="step_split1_bf16_q1_nofb_narrow" INCLUDE="${INC:?}" \
  benchmarks/ladder/build_variants.sh /tmp/binG/bin vf=""
mkdir -p .gpuG && tar cf - -C /tmp/binG bin | xz -T2 -6 > .gpuG/binG.tar.xz
grep -q '^.gpuG/' .git/info/exclude 2>/dev/null || echo '.gpuG/' >> .git/info/exclude
