#!/usr/bin/env bash
# Call ZR (any card): carry [".gpuZP", ".gpuZR"] (../../ladder_s61/prepared/build_ZP.sh, build_ZR.sh). Call ZP's
# product (zp: the gate mode 1 logits stored L2 evict-last, dropped once read) won 0.1–2.4% on an H100 but lost
# 0.5–0.7% for record / fused q = 4 at H = 96, B = 256, whose 48 MiB of logits kept evict-last fill the L2. zr keeps
# them evict-last only up to a third of the L2 (heuristics::gate_logits_keep_in_l2). Checks side by side: zr's whole
# C++ GPU suite in four shards (SharedGateLogitsPastTheL2Share runs the other branch) and its sanitizer matrix under
# the four tools; then LADDER_R1 / R2 (tree, zp, zr; the second pass reversed) in what CAP (default 330 s) leaves.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
CAP=${CAP:-330}
B=/tmp/zr && mkdir -p $B /tmp/o && tar xJf .gpuZP/binZP.tar.xz -C $B && tar xJf .gpuZR/binZR.tar.xz -C $B &&
  echo "zp $(cat $B/bin/commit.txt), zr $(head -1 $B/bin/commit_zr.txt)"
P=docs/data/ladder_s63/prepared
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TESTS_S:-240} $B/bin/kda_cuda_tests_zr --gtest_brief=1 \
    > /tmp/o/suite$i.txt 2>&1 &
done
for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
  timeout ${SAN_S:-200} compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests_zr \
    --gtest_filter='SanitizerMatrix.*' --gtest_brief=1 > /tmp/o/san-$tool.log 2>&1 &
done
wait
{
  for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]|tests? ran|FAILED TEST' /tmp/o/suite$i.txt | tr '\n' ' ')"; done
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/suite*.txt | sort -u
  grep -h 'SharedGateLogitsPastTheL2Share' /tmp/o/suite*.txt | head -3
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
    echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/san-$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/san-$tool.log)"
  done
} | tee "$OUT/checks.txt"
echo "checks done at ${SECONDS} s"
left=$((CAP - SECONDS))
if ((left > 30)); then
  mkdir -p /tmp/o/P
  OUT=/tmp/o/P BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $P/LADDER_R1.txt $P/LADDER_R2.txt \
    > /tmp/o/P/log.txt 2>&1
  cp /tmp/o/P/ladder_summary.txt "$OUT/sum_R.txt" 2>/dev/null
fi
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/sum_R.txt" 2>/dev/null
