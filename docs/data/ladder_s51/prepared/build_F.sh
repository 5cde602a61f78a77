#!/usr/bin/env bash
# Builds .gpuF for callF.sh: the tree's kda_bench, rungs pfa / pft (kda_bench with the Wide q = 1 and fp32 q = 4
# kernels compiled against a copy of include/ with ../rung_pf.diff and -DKDA_STEP_OWN_PREFETCH_TAIL), and kda_tests_bugb
# (the planted missing barrier, bug_staged_barrier.diff). About 3 minutes on 2 cores once build/gpu is up to date.
# (Run 1's binaries were built with rung_pf.diff in the tree itself, the macro off for the tree's kda_bench.)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_tests kda_bench >/dev/null
Q1="step_split1_f32_q1 step_split1_f32_q1_keep step_split1_f32_q1_nofb step_split1_f32_q1_nofb_keep step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1 step_split1_bf16_q1_nofb_occ6 step_split1_bf16_q1_nofb_occ6_drop step_split1_f32_q4_nofb step_split1_f32_q4_nofb_occ5"
rm -rf .gpuF /tmp/binF /tmp/pfF && mkdir -p .gpuF /tmp/binF/bin /tmp/pfF && cp -r include /tmp/pfF/ && (cd /tmp/pfF && patch -p1 < "$OLDPWD/docs/data/ladder_s51/rung_pf.diff")
INST="$Q1" INCLUDE=/tmp/pfF/include benchmarks/ladder/build_variants.sh /tmp/binF/bin pfa="-DKDA_STEP_OWN_PREFETCH_TAIL=1073741824" \
  pft="-DKDA_STEP_OWN_PREFETCH_TAIL=1056"
rm -rf /tmp/bugB && mkdir -p /tmp/bugB && cp -r include /tmp/bugB/ && (cd /tmp/bugB && patch -p1 < "$OLDPWD/docs/data/ladder_s51/prepared/bug_staged_barrier.diff")
INST="step_split1_f32_q1 step_split1_bf16_q1" INCLUDE=/tmp/bugB/include TARGET=kda_tests \
  benchmarks/ladder/build_variants.sh /tmp/binF/bin bugb=""
cp build/gpu/benchmarks/kda_bench /tmp/binF/bin/
tar cJf .gpuF/binF.tar.xz -C /tmp/binF bin
grep -q '^.gpuF/' .git/info/exclude 2>/dev/null || echo '.gpuF/' >> .git/info/exclude
ls -la .gpuF
