#!/usr/bin/env bash
# Call ZH (any card; an H200 preferred: its L2 sets the share): carry [".gpuZH"] (build_ZH.sh). Rung zh against the
# tree: the logits kept evict-last up to half the L2 (the tree: a third), dropped by a Wide step only where kept. Run 2
# measured keeping 24 MiB (record q = 4, H = 96, B = 128) 1.0% faster than the plain stores the tree now gives it, and
# the drop of lines not kept 0.06-0.21% slower at 48 MiB. Checks side by side: zh's whole C++ GPU suite in four shards
# (but SharedGateLogitsPastTheL2Share, whose test object is the tree's: it sizes its step by the tree's share, which zh
# keeps); then LADDER_H1 / H2 (the second pass reversed) in what CAP (default 420 s) leaves. If zh wins: apply
# rung_zh.diff to include/, set test_plan.cpp's GateLogitsKeptInL2 test to half the L2 (record q = 4, B = 128 kept).
# On an H200 the tree's targets grid (LADDER_T.txt: the issues' decode, bf16, append and verify targets, once) runs
# first, after the checks: the landed logits rule was measured on an H100 only. TARGETS=0 skips it.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
CAP=${CAP:-420}
B=/tmp/zh && mkdir -p $B /tmp/o && tar xJf .gpuZH/binZH.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
P=docs/data/ladder_s63/prepared
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TESTS_S:-200} $B/bin/kda_cuda_tests_zh --gtest_brief=1 \
    --gtest_filter='-CudaVsCpu.SharedGateLogitsPastTheL2Share' > /tmp/o/suite$i.txt 2>&1 &
done
wait
{
  for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[==========\]|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' /tmp/o/suite$i.txt | tr '\n' ' ')"; done
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/suite*.txt | sort -u
} | tee "$OUT/checks.txt"
echo "checks done at ${SECONDS} s"
if [[ $GPU == *H200* && ${TARGETS:-1} == 1 ]]; then
  mkdir -p /tmp/o/T
  OUT=/tmp/o/T BIN=$B/bin STAGES=ladder LADDER="$(paste -sd';' $P/LADDER_T.txt)" timeout $((CAP - SECONDS)) \
    scripts/gpu_run.sh > /tmp/o/targets_run.txt 2>&1
  tail -40 /tmp/o/targets_run.txt > "$OUT/targets.txt"
  echo "targets done at ${SECONDS} s"
fi
left=$((CAP - SECONDS))
if ((left > 30)); then
  mkdir -p /tmp/o/P
  OUT=/tmp/o/P BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $P/LADDER_H1.txt $P/LADDER_H2.txt \
    > /tmp/o/P/log.txt 2>&1
  cp /tmp/o/P/ladder_summary.txt "$OUT/sum_H.txt" 2>/dev/null
fi
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/sum_H.txt" 2>/dev/null
