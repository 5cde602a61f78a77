#!/usr/bin/env bash
# Call Q: 1. fp32 gate mode 2 decode from 96 to 768 items — the tree with heuristics::q1_decode_taps_before_wait
# (spread grids on the kernel for every kind), call P's tree (`old`) and rung k31 (every grid of at most 528 CTAs
# there) — two passes in both orders (LADDER_Q1.txt, LADDER_Q2.txt); 2. the GPU tests that hold the q = 1 kernels
# to their plans, on the tree and on the planted bug (bug_taps_rule.diff: the rule inverted); 3. on an H200 only, the
# issues' targets grid once (LADDER_QT.txt). Binaries: .gpuQ (build_Q.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuQ/binQ.tar.xz -C /tmp/b
D=docs/data/ladder_s54/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_Q1.txt $D/LADDER_Q2.txt
F='CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.Fp32DecodeTapsBeforeWaitByGrid:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.EveryVariantEveryStepKind:CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.GraphCaptureAndReplay'
for t in kda_cuda_tests kda_cuda_tests_plant; do
  timeout 200 /tmp/b/bin/$t --gtest_brief=1 --gtest_filter="$F" > "$OUT/$t.txt" 2>&1; echo "$t rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|the kinds compiled" "$OUT/$t.txt" | head -8
done
if [[ $GPU == *H200* ]]; then
  mkdir -p /tmp/t && OUT=/tmp/t BIN=/tmp/b/bin STAGES=ladder LADDER="$(paste -sd';' $D/LADDER_QT.txt)" scripts/gpu_run.sh > /dev/null 2>&1
  tar czf "$OUT/targets.tgz" -C /tmp/t . && cp /tmp/t/ladder_summary.txt "$OUT/targets_summary.txt" 2>/dev/null
fi
echo "--- ladder"; cat "$OUT/ladder_summary.txt"
