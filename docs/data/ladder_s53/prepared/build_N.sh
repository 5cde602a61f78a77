#!/usr/bin/env bash
# Builds .gpuN for callN.sh: the tree's kda_bench; session 52's kda_bench (from .gpuI) as kda_bench_s52; rung ew
# (rung_ew.diff on a copy of include/, -DKDA_EARLY_ISSUE=1) in the Wide q = 1 kernels that issue their first stages at
# the request (kda_bench_ew, kda_cuda_tests_ew); the timeline builds of the tree (kda_bench_tltree) and of ew
# (kda_bench_ewtl) in the kernels the timeline's points run. ew adds spills only in the six-CTA kernels (fp32 16 -> 28 bytes
# stored, 36 loaded; bf16 recording kinds 8 -> 12); the fp32 decode kernel it is for has none.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench kda_cuda_tests
rm -rf /tmp/rew /tmp/binN && mkdir -p /tmp/rew /tmp/binN/bin && cp -r include /tmp/rew/ && (cd /tmp/rew && patch -p0 include/kda/cuda/step_kernel.cuh < "$OLDPWD/docs/data/ladder_s53/prepared/rung_ew.diff")
INST="step_split1_f32_q1_nofb_keep step_split1_f32_q1_nofb step_split1_f32_q1 step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1 step_split1_bf16_q1_nofb_occ6_drop" \
  INCLUDE=/tmp/rew/include TARGET="kda_bench kda_cuda_tests" benchmarks/ladder/build_variants.sh /tmp/binN/bin ew="-DKDA_EARLY_ISSUE=1"
INST="step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6 step_split1_f32_q1_keep" INCLUDE=/tmp/rew/include \
  benchmarks/ladder/build_variants.sh /tmp/binN/bin ewtl="-DKDA_EARLY_ISSUE=1 -DKDA_TIMELINE"
INST="step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6 step_split1_f32_q1_keep" \
  benchmarks/ladder/build_variants.sh /tmp/binN/bin tltree="-DKDA_TIMELINE"
cp build/gpu/benchmarks/kda_bench /tmp/binN/bin/
mkdir -p /tmp/s52x && tar xJf .gpuI/binI.tar.xz -C /tmp/s52x bin/kda_bench && cp /tmp/s52x/bin/kda_bench /tmp/binN/bin/kda_bench_s52
mkdir -p .gpuN && tar cf - -C /tmp/binN bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuN/binN.tar.xz
grep -q '^.gpuN/' .git/info/exclude 2>/dev/null || echo '.gpuN/' >> .git/info/exclude
