#!/usr/bin/env bash
# Builds .gpuC for callC.sh: kda_bench and kda_cuda_tests with the narrow form (KDA_STEP_NARROW = N: the storing
# kinds' six-CTA bf16 kernel, step_split1_bf16_q1_nofb_occ6, as CTAs of 128 threads, N per SM, 16-row chunks;
# the planner lays decode / per_token out for it) — base (0: the tree), n8, n10, n12. INC: a copy of include/ with
# rung_narrow.diff; PLAN: a copy of src/plan/plan.cpp with its plan part.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/binC && mkdir -p /tmp/binC/bin
TARGET="kda_bench kda_cuda_tests" INST="step_split1_bf16_q1_nofb_occ6" INCLUDE="${INC:?}" PLAN="${PLAN:?}" \
  benchmarks/ladder/build_variants.sh /tmp/binC/bin base="" n8="-DKDA_STEP_NARROW=8" n10="-DKDA_STEP_NARROW=10" \
  n12="-DKDA_STEP_NARROW=12"
rm -f /tmp/binC/bin/kda_cuda_tests_{base,n8}
mkdir -p .gpuC && tar cf - -C /tmp/binC bin | xz -T2 -6 > .gpuC/binC.tar.xz
grep -q '^.gpuC/' .git/info/exclude 2>/dev/null || echo '.gpuC/' >> .git/info/exclude
