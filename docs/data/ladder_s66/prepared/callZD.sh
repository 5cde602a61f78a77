#!/usr/bin/env bash
# Session 66's call ZD: carry [".gpuZB", ".whl", ".gpuZC", ".gpuZD"] (build_ZD.sh). On an H200: call ZC's H200 part
# (callZC.sh: call ZB's H200 part, then rungs f16a and a4). On another card: the H200's DRAM bandwidth per SM on that
# card (kda_bench --sms 88: a green context of 88 SMs), two passes in both orders (LADDER_D1 / D2, sum_D.txt), in CAP
# seconds (default 300):
# - first one line at --sms 66 (72 SMs: the granularity is 8; fp32 decode, H = 96, B = 256) beside the whole card's: whether the partition holds;
# - the tree on all SMs and on 88: fp32 decode and append Qr = 8, 16 at H = 48, 96 x B = 64, 128, 256, bf16 decode at
#   H = 24, 48, 96 x B = 64, 128, 256 (on 88 SMs in the narrow form, as the planner lays it out on an H200), `auto`;
#   the ratios to compare with the H200's (ladder_s64/run1: fp32 decode 1.086-1.114 x floor, append Qr = 8 / decode
#   0.70-0.73, Qr = 16 / Qr = 8 1.21-1.23, bf16 1.11-1.19 x floor);
# - rungs f16a and a4 on 88 SMs: fp32 decode and append Qr = 8 at H = 48, 96 x B = 64, 256.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ $GPU == *H200* ]]; then exec bash docs/data/ladder_s66/prepared/callZC.sh; fi
echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/zd && mkdir -p $B /tmp/o/D && tar xJf .gpuZD/binZD.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
P=docs/data/ladder_s66/prepared
OUT=/tmp/o/D BIN=$B/bin timeout ${CAP:-300} benchmarks/ladder/ladder_passes.sh $P/LADDER_D1.txt $P/LADDER_D2.txt \
  > /tmp/o/D/log.txt 2>&1
cp /tmp/o/D/ladder_summary.txt "$OUT/sum_D.txt"
tar czf "$OUT/all.tgz" -C /tmp/o .
grep -h "green context" /tmp/o/D/*.txt 2>/dev/null | sort | uniq -c | head -3
cat "$OUT/sum_D.txt"
