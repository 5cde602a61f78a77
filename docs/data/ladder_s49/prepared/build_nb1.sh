#!/usr/bin/env bash
# RUNG nb1 (session 49, built, not run): the q = 1 Wide kernels without the staged-inputs barrier where the step has no
# F_B dot (rung_nb1.diff). kda_bench_nb1, kda_cuda_tests_nb1, kda_tests_nb1 against build/gpu's library (the tree).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/nb1 && mkdir -p /tmp/nb1 && cp -r include /tmp/nb1/ && (cd /tmp/nb1 && patch -p1 < "$OLDPWD/docs/data/ladder_s49/prepared/rung_nb1.diff")
INST="step_split1_bf16_q1 step_split1_bf16_q1_nofb_occ6 step_split1_bf16_q1_nofb_occ6_drop step_split1_f32_q1 step_split1_f32_q1_keep step_split1_f32_q1_nofb step_split1_f32_q1_nofb_keep step_split1_f32_q1_nofb_occ6" \
  INCLUDE=/tmp/nb1/include TARGET="kda_bench kda_cuda_tests kda_tests" benchmarks/ladder/build_variants.sh .gpuE/bin nb1=""
mkdir -p .gpuE/pack && tar cJf .gpuE/pack/binE.tar.xz -C .gpuE bin/kda_bench_nb1 bin/kda_cuda_tests_nb1 bin/kda_tests_nb1
