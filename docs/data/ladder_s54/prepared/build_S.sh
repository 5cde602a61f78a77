#!/usr/bin/env bash
# Builds .gpuS for callS.sh: the tree's kda_bench and rung sm2 (KDA_STEP_STAGE_BYTES_MORE=32768: two fp32 stages where
# the plan takes three — spread grids' decode, and gate modes 1 and 2 from 6144 CTAs) and rung pfa (rung_pfa.diff on a
# copy of include/: session 51's `pfa`, every CTA of the fp32 decode kernel without F_B and of the six-CTA bf16 decode
# kernel prefetching its item's later state chunks into L2 with its first stages; `pft` the grid's last 1056 CTAs
# only; both lost on the H100 in fp32, for the H200 only).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/binS && mkdir -p /tmp/binS/bin
benchmarks/ladder/build_variants.sh /tmp/binS/bin sm2="-DKDA_STEP_STAGE_BYTES_MORE=32768"
rm -rf /tmp/pfS && mkdir -p /tmp/pfS && cp -r include /tmp/pfS/ && (cd /tmp/pfS && patch -p0 include/kda/cuda/step_kernel.cuh < "$OLDPWD/docs/data/ladder_s54/prepared/rung_pfa.diff")
INST="step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6" INCLUDE=/tmp/pfS/include \
  benchmarks/ladder/build_variants.sh /tmp/binS/bin pfa="-DKDA_STEP_OWN_PREFETCH_TAIL=1073741824" pft="-DKDA_STEP_OWN_PREFETCH_TAIL=1056"
cp build/gpu/benchmarks/kda_bench /tmp/binS/bin/
mkdir -p .gpuS && tar cf - -C /tmp/binS bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS/binS.tar.xz
grep -q '^.gpuS/' .git/info/exclude 2>/dev/null || echo '.gpuS/' >> .git/info/exclude
