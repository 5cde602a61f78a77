#!/usr/bin/env bash
# Builds .gpuB for callB.sh: kda_bench with the six-CTA bf16 decode kernel (step_split1_bf16_q1_nofb_occ6) compiled
# with the knob KDA_STEP_STAGES_AFTER_WINDOW_WAVES (T::kFirstStagesAfterWindow for the grid's first N waves only):
# base (-1: every CTA, the tree), w0 (none: every CTA issues its first stages at the request), w1, w2 (the first
# one / two waves), and kda_cuda_tests_w0. INC: the tree's include/ with the knob (rung_wf.diff applied).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
INC=${INC:?INC: a copy of include/ with rung_wf.diff}
rm -rf /tmp/binB && mkdir -p /tmp/binB/bin
TARGET="kda_bench kda_cuda_tests" INST="step_split1_bf16_q1_nofb_occ6" INCLUDE="$INC" \
  benchmarks/ladder/build_variants.sh /tmp/binB/bin base="" w0="-DKDA_STEP_STAGES_AFTER_WINDOW_WAVES=0" \
  w1="-DKDA_STEP_STAGES_AFTER_WINDOW_WAVES=1" w2="-DKDA_STEP_STAGES_AFTER_WINDOW_WAVES=2"
rm -f /tmp/binB/bin/kda_cuda_tests_{base,w1,w2}
mkdir -p .gpuB && tar cf - -C /tmp/binB bin | xz -T2 -6 > .gpuB/binB.tar.xz
grep -q '^.gpuB/' .git/info/exclude 2>/dev/null || echo '.gpuB/' >> .git/info/exclude
