#!/usr/bin/env bash
# Builds .gpuI for callI.sh (rung_cw_wf.diff applied to a copy of include/), each rung in the Wide q = 1 kernels where it
# adds no spills (cw2: fp32 decode in gate modes 1 and 2, the fp32 recording kinds at four CTAs per SM, bf16 six-CTA
# decode; wf, wf1: every Wide q = 1 kernel):
#   cw2  the q = 1 Wide kernels' conv taps and bias loaded before the PDL wait instead of at the conv
#        (-DKDA_Q1_EARLY_CONV=2; =1 loads them in the first wave)
#   wf   thread 0 issues the first stages' state copies once its first-wave loads have returned, not right after
#        the request (-DKDA_STATE_AFTER_WINDOW=1): the grid's window loads reach DRAM ahead of its state bytes
#   wf1  wf in the grid's first wave only (blockIdx below CTAs per SM × SMs; -DKDA_STATE_AFTER_WINDOW=2)
#   wfc  cw2 and wf; wfctl: wfc with the timeline probe (KDA_TIMELINE)
# and the tree's kda_bench and kda_bench_tl from .gpuH.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/rcw /tmp/binI && mkdir -p /tmp/rcw /tmp/binI/bin && cp -r include /tmp/rcw/ && (cd /tmp/rcw && patch -p1 < "$OLDPWD/docs/data/ladder_s52/prepared/rung_cw_wf.diff")
# cw2 (and with it wfc, wfctl): where the conv taps before the wait add no spills
INST_CW="step_split1_f32_q1_nofb_keep step_split1_bf16_q1_nofb_occ6 step_split1_f32_q1_nofb"
# wf, wf1: every Wide q = 1 kernel (no new spills in any)
INST_WF="$INST_CW step_split1_f32_q1_keep step_split1_f32_q1 step_split1_f32_q1_nofb_occ6 step_split1_bf16_q1 step_split1_bf16_q1_nofb_occ6_drop"
INST="$INST_CW" INCLUDE=/tmp/rcw/include benchmarks/ladder/build_variants.sh /tmp/binI/bin cw2="-DKDA_Q1_EARLY_CONV=2" \
  wfc="-DKDA_STATE_AFTER_WINDOW=1 -DKDA_Q1_EARLY_CONV=2" wfctl="-DKDA_STATE_AFTER_WINDOW=1 -DKDA_Q1_EARLY_CONV=2 -DKDA_TIMELINE"
INST="$INST_WF" INCLUDE=/tmp/rcw/include benchmarks/ladder/build_variants.sh /tmp/binI/bin wf="-DKDA_STATE_AFTER_WINDOW=1" \
  wf1="-DKDA_STATE_AFTER_WINDOW=2"
# the GPU tests with both rungs in every Wide q = 1 kernel (a superset of each rung's reach; spills where cw2 adds them
# change no values)
INST="$INST_WF" INCLUDE=/tmp/rcw/include TARGET=kda_cuda_tests benchmarks/ladder/build_variants.sh /tmp/binI/bin \
  wfc="-DKDA_STATE_AFTER_WINDOW=1 -DKDA_Q1_EARLY_CONV=2"
mkdir -p /tmp/binH && tar xJf .gpuH/binH.tar.xz -C /tmp/binH && cp /tmp/binH/bin/kda_bench /tmp/binH/bin/kda_bench_tl /tmp/binI/bin/
mkdir -p .gpuI && tar cJf .gpuI/binI.tar.xz -C /tmp/binI bin
grep -q '^.gpuI/' .git/info/exclude 2>/dev/null || echo '.gpuI/' >> .git/info/exclude
