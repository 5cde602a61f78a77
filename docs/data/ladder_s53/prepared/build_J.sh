#!/usr/bin/env bash
# Builds .gpuJ for callJ.sh: rung sp (rung_sp.diff applied to a copy of include/, -DKDA_SUCCESSOR_PREFETCH=1) in every
# Wide q = 1 kernel, as kda_bench_sp, kda_bench_sptl (with the timeline probe) and kda_cuda_tests_sp.
# (sp adds spills only in the six-CTA kernels: fp32 16 -> 36 bytes, bf16 0 -> 8.)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/rsp /tmp/binJ && mkdir -p /tmp/rsp /tmp/binJ/bin && cp -r include /tmp/rsp/ && (cd /tmp/rsp && patch -p0 include/kda/cuda/step_kernel.cuh < "$OLDPWD/docs/data/ladder_s53/prepared/rung_sp.diff")
INST="step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6 step_split1_f32_q1_nofb step_split1_f32_q1_keep step_split1_f32_q1 step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1 step_split1_bf16_q1_nofb_occ6_drop"
INST="$INST" INCLUDE=/tmp/rsp/include TARGET="kda_bench kda_cuda_tests" benchmarks/ladder/build_variants.sh /tmp/binJ/bin sp="-DKDA_SUCCESSOR_PREFETCH=1"
INST="$INST" INCLUDE=/tmp/rsp/include benchmarks/ladder/build_variants.sh /tmp/binJ/bin sptl="-DKDA_SUCCESSOR_PREFETCH=1 -DKDA_TIMELINE"
mkdir -p .gpuJ && tar cJf .gpuJ/binJ.tar.xz -C /tmp/binJ bin
grep -q '^.gpuJ/' .git/info/exclude 2>/dev/null || echo '.gpuJ/' >> .git/info/exclude
