#!/usr/bin/env bash
# Builds .gpuI for callI.sh: rungs cw1 / cw2 (the q = 1 Wide kernels' conv taps and bias loaded in the first wave /
# before the PDL wait instead of at the conv, rung_cw.diff applied to a copy of include/, -DKDA_Q1_EARLY_CONV=1 / 2) for
# the kernels where they add no spills (fp32 decode in gate modes 1 and 2, fp32 recording kinds at four CTAs per SM,
# bf16 six-CTA decode), cw2tl (cw2 with the timeline probe), and the tree's kda_bench and kda_bench_tl from .gpuH.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/rcw /tmp/binI && mkdir -p /tmp/rcw /tmp/binI/bin && cp -r include /tmp/rcw/ && (cd /tmp/rcw && patch -p1 < "$OLDPWD/docs/data/ladder_s52/prepared/rung_cw.diff")
INST="step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6 step_split1_f32_q1_nofb" INCLUDE=/tmp/rcw/include \
  benchmarks/ladder/build_variants.sh /tmp/binI/bin cw1="-DKDA_Q1_EARLY_CONV=1" cw2="-DKDA_Q1_EARLY_CONV=2" \
  cw2tl="-DKDA_Q1_EARLY_CONV=2 -DKDA_TIMELINE"
mkdir -p /tmp/binH && tar xJf .gpuH/binH.tar.xz -C /tmp/binH && cp /tmp/binH/bin/kda_bench /tmp/binH/bin/kda_bench_tl /tmp/binI/bin/
mkdir -p .gpuI && tar cJf .gpuI/binI.tar.xz -C /tmp/binI bin
grep -q '^.gpuI/' .git/info/exclude 2>/dev/null || echo '.gpuI/' >> .git/info/exclude
