#!/usr/bin/env bash
# Builds .gpuH for callH.sh: the tree's kda_bench (with --dump-out) and kda_bench_tl, whose q = 1 Wide
# decode instantiations (fp32 gate modes 0 and 2, bf16's six-CTA kernels) write their CTA's timeline
# into the item's output row (KDA_TIMELINE, benchmarks/ladder/timeline.py); with them the sanitizer
# matrix binaries of .gpuG (kda_tests with its tenth shape, kda_tests_bugb: the planted missing
# barrier), whose kernels are the tree's. About 3 minutes on 2 cores once build/gpu is up to date.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench >/dev/null
rm -rf .gpuH /tmp/binH && mkdir -p .gpuH /tmp/binH && tar xJf .gpuG/binG.tar.xz -C /tmp/binH
INST="step_split1_f32_q1_nofb_keep step_split1_f32_q1_keep step_split1_bf16_q1_nofb_occ6 step_split1_bf16_q1_nofb_occ6_drop" \
  benchmarks/ladder/build_variants.sh /tmp/binH/bin tl="-DKDA_TIMELINE"
cp build/gpu/benchmarks/kda_bench /tmp/binH/bin/
tar cJf .gpuH/binH.tar.xz -C /tmp/binH bin
grep -q '^.gpuH/' .git/info/exclude 2>/dev/null || echo '.gpuH/' >> .git/info/exclude
ls -la .gpuH
