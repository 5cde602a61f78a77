#!/usr/bin/env bash
# Call Y (for an H200): 1. rung c3s4 (heuristics::step_all_chunks: fp32 decode without the F_B slice keeps every chunk
# of its item in flight at three CTAs per SM from 6144 CTAs) against the tree at 6144–24,576 items in
# gate modes 2 and `auto` (its GPU tests: run 5 of this session, callX.sh); 2. the bf16 bound at the step's own bytes
# (`rows_prepared --bf16`: rows16, rows16/4, rows16c4 and rows16io, rows16io/4) beside bf16 `auto` at the six points
# from 6144 items. Two passes in both orders (LADDER_Y1.txt, Y2) through ladder_passes.sh, which writes
# bounds_verdict.txt. Binaries: .gpuY (build_Y.sh). On an H100 (c3s4 tied there, run 6; bf16 meets its floor target
# there) it ends at once, or with Y_SMOKE=1 runs the bf16 forms at one point, as a smoke test.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuY/binY.tar.xz -C /tmp/b
# elsewhere only a smoke run of the new bf16 forms at one point (Y_SMOKE=1; run 7), or nothing
if [[ $GPU != *H200* ]]; then
  [[ ${Y_SMOKE:-0} == 1 ]] && /tmp/b/bin/rows_prepared 96 64 --bf16 2>&1 | tee "$OUT/smoke.txt" | tail -9
  exit 0
fi
D=docs/data/ladder_s55/prepared
BIN=/tmp/b/bin benchmarks/ladder/ladder_passes.sh $D/LADDER_Y1.txt $D/LADDER_Y2.txt
grep -h "bf16" "$OUT/bounds_verdict.txt"; cat "$OUT/ladder_summary.txt"
