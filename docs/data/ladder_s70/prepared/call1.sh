#!/usr/bin/env bash
# Session 70's call 1, carry [".gpuS70", ".gpuS69", ".kdawhl"] (build_T.sh; ladder_s69's build_B.sh and wheel), in
# CAP seconds (default 560). On an H200: the tree's targets grid (ladder_s63/prepared/LADDER_T.txt, one pass, at most
# 220 s), then the open decode targets beside their own-bytes bounds (ladder_s64/prepared/LADDER_B1.txt, at most
# 170 s), then session 69's call B (the checks owed on the tree) in what is left. On any other card: call B alone.
set -uo pipefail
CAP=${CAP:-560}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
if [[ $GPU == *H200* ]]; then
  B=/tmp/s70 && mkdir -p $B /tmp/o/T /tmp/o/B && tar xJf .gpuS70/binT.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
  OUT=/tmp/o/T BIN=$B/bin timeout 220 benchmarks/ladder/ladder_passes.sh docs/data/ladder_s63/prepared/LADDER_T.txt \
    > /tmp/o/T/log.txt 2>&1
  cp /tmp/o/T/ladder_summary.txt "$OUT/sum_T.txt"; cp /tmp/o/T/ladder.tgz "$OUT/ladder_T.tgz"
  echo "targets grid done at ${SECONDS} s"
  OUT=/tmp/o/B BIN=$B/bin timeout 170 benchmarks/ladder/ladder_passes.sh docs/data/ladder_s64/prepared/LADDER_B1.txt \
    > /tmp/o/B/log.txt 2>&1
  cp /tmp/o/B/ladder_summary.txt "$OUT/sum_B.txt" 2>/dev/null; cp /tmp/o/B/bounds_verdict.txt "$OUT/bounds_B.txt" 2>/dev/null
  cp /tmp/o/B/ladder.tgz "$OUT/ladder_B.tgz" 2>/dev/null
  echo "bounds done at ${SECONDS} s"
  cat "$OUT/sum_T.txt" | cut -c1-200 | tail -60
fi
left=$((CAP - SECONDS))
if ((left > 120)); then
  echo "call B at ${SECONDS} s, ${left} s left"
  TESTS_S=$(( (left - 20) * 3 / 5 )) CAP=$((left - 10)) bash docs/data/ladder_s69/prepared/callB.sh > "$OUT/callB.txt" 2>&1
  tail -30 "$OUT/callB.txt"
fi
