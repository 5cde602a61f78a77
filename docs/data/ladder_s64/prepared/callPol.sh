#!/usr/bin/env bash
# Session 65's last call: carry [".gpuZB", ".gpuPol"]. On an H200 first call ZB's own-bytes bounds (LADDER_B1 / B2,
# bounds_verdict.txt); on any card then rung `pol` (the L2 policies from libcu++'s cuda::access_property instead of
# createpolicy: the same 64-bit values, a different register allocation in the fp32 six-CTA kernel) against the tree
# (kda_bench_tree of .gpuZB), two passes in both orders (LADDER_P1 / P2): fp32 and bf16 decode / append Qr = 8 (the
# six-CTA kernels, whose state copies are evict-first) and record / fused q = 4 in gate mode 1 (the gate kernel's
# logits stores).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
P=docs/data/ladder_s64/prepared B=/tmp/zb
mkdir -p $B /tmp/o && tar xJf .gpuZB/binZB.tar.xz -C $B && tar xJf .gpuPol/binP.tar.xz -C $B
if [[ $GPU == *H200* ]]; then
  mkdir -p /tmp/o/B
  OUT=/tmp/o/B BIN=$B/bin timeout ${CAP_B:-240} benchmarks/ladder/ladder_passes.sh $P/LADDER_B1.txt $P/LADDER_B2.txt \
    > /tmp/o/B/log.txt 2>&1
  cp /tmp/o/B/ladder_summary.txt "$OUT/sum_B.txt"; cp /tmp/o/B/bounds_verdict.txt "$OUT/"
fi
mkdir -p /tmp/o/P
OUT=/tmp/o/P BIN=$B/bin timeout ${CAP_P:-150} benchmarks/ladder/ladder_passes.sh $P/LADDER_P1.txt $P/LADDER_P2.txt \
  > /tmp/o/P/log.txt 2>&1
cp /tmp/o/P/ladder_summary.txt "$OUT/sum_P.txt"
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/bounds_verdict.txt" "$OUT/sum_B.txt" "$OUT/sum_P.txt" 2>/dev/null
