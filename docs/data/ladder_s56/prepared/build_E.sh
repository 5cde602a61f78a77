#!/usr/bin/env bash
# Builds .gpuE for callE.sh: kda_bench as head (the planner without the narrow form: the tree before it), tree (the
# narrow form), and ifif / tifif: the same with the q = 1 kernels' conv as two separate tests (`if (tid < K)` then
# `if (tid >= K && tid < K + RC)`, the form rung_narrow.diff had, whose six-CTA bf16 kernel ran 768 items 5% faster on
# an H100 in call D) — INC: a copy of include/ with rung_ifif.diff.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/binE && mkdir -p /tmp/binE/bin
I="step_split1_bf16_q1_nofb_occ6 step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6_drop step_split1_f32_q1_nofb_occ6"
benchmarks/ladder/build_variants.sh /tmp/binE/bin head="-DKDA_STEP_NARROW_CTAS_PER_SM=0" tree=""
INST="$I" INCLUDE="${INC:?}" benchmarks/ladder/build_variants.sh /tmp/binE/bin ifif="-DKDA_STEP_NARROW_CTAS_PER_SM=0" tifif=""
mkdir -p .gpuE && tar cf - -C /tmp/binE bin | xz -T2 -6 > .gpuE/binE.tar.xz
grep -q '^.gpuE/' .git/info/exclude 2>/dev/null || echo '.gpuE/' >> .git/info/exclude
