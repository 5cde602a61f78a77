#!/usr/bin/env bash
# Call B (prepared in session 58; an H200, after call A): the issue-slot use of fp32 append over whole Qr cycles, the
# measurement issue 14's Qr = 16 ≤ 1.10 × Qr = 8 target waits on. Session 47's ncu of append (ladder_s47/run1, H100)
# profiled one launch each, whose pending count is the launch's place in the cycle: one step of eight or sixteen, not
# the mean. Here 2·Qr launches after 32 skipped are profiled, meant as every step of two cycles; kda_bench launches each
# step four times (four pools), so they cover 2·Qr / 4 steps, one per four launches (session 59, ladder_s59/run2), with
# few metrics (one pass each): duration, warp instructions issued, issue slots busy, DRAM bytes. Carry [".gpuA"] (its
# kda_bench_tree is the tree's).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && [[ -x /tmp/b/bin/kda_bench_tree ]] || tar xJf .gpuA/binA.tar.xz -C /tmp/b
for qr in 8 16; do
  timeout 200 ncu --clock-control none --kernel-name regex:kda_step --launch-skip 32 --launch-count $((2 * qr)) --csv \
    --metrics gpu__time_duration.sum,sm__inst_issued.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes.sum \
    /tmp/b/bin/kda_bench_tree --H 96 --B 256 --mode append --qr $qr --variant auto --gate 2 --state f32 --layout sd \
    > "$OUT/ncu_append_qr$qr.csv" 2> "$OUT/ncu_append_qr$qr.log"
  echo "qr $qr: rc $?"
  python3 - "$OUT/ncu_append_qr$qr.csv" <<'PY'
import csv, sys, statistics as st
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
by = {}
for r in rows:
    by.setdefault(r["ID"], {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
m = list(by.values())
if m:
    for k in ("gpu__time_duration.sum", "sm__inst_issued.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active", "dram__bytes.sum"):
        v = [x[k] for x in m if k in x]
        print(f"  {k}: mean {st.mean(v):.4g}, min {min(v):.4g}, max {max(v):.4g} over {len(v)} launches")
PY
done
