#!/usr/bin/env bash
# Builds .gpuA for callA.sh: kda_bench and kda_cuda_tests with the six-CTA bf16 decode kernel
# (step_split1_bf16_q1_nofb_occ6) compiled without (base) and with (sw) the rung KDA_STEP_STAGED_WEIGHTS
# (A_log, dt_bias and norm_w staged in shared memory by copies issued before the PDL wait). The rung's header
# is the tree's include/ with the knob (INCLUDE=, so build/gpu's library keeps its objects).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
INC=${INC:-include}
rm -rf /tmp/binA && mkdir -p /tmp/binA/bin
TARGET="kda_bench kda_cuda_tests" INST="step_split1_bf16_q1_nofb_occ6" INCLUDE="$INC" \
  benchmarks/ladder/build_variants.sh /tmp/binA/bin base="" sw="-DKDA_STEP_STAGED_WEIGHTS=1"
rm -f /tmp/binA/bin/kda_cuda_tests_base
mkdir -p .gpuA && tar cf - -C /tmp/binA bin | xz -T2 -6 > .gpuA/binA.tar.xz
grep -q '^.gpuA/' .git/info/exclude 2>/dev/null || echo '.gpuA/' >> .git/info/exclude
