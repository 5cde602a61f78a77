#!/usr/bin/env bash
# Call V (session 61; any card): the tree's own build (build/gpu rebuilt at the tree's commit: kda_tests with the
# sanitizer matrix, kda_cuda_tests; carry [".gpuV"]): the sanitizer matrix under the four tools side by side (the
# narrow form's ring changed: 16-row chunks in three stages), then the whole C++ GPU suite in four shards in what CAP
# (default 380 s) leaves.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
CAP=${CAP:-380}
B=/tmp/v && mkdir -p $B /tmp/o && tar xJf .gpuV/binV.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
for tool in memcheck racecheck synccheck initcheck; do
  timeout 220 compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests --gtest_filter='SanitizerMatrix.*' \
    --gtest_brief=1 > /tmp/o/san-$tool.log 2>&1 &
done
wait
for tool in memcheck racecheck synccheck initcheck; do
  echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/san-$tool.log | tail -1) $(grep -o '\[sanitizer-matrix\].*' /tmp/o/san-$tool.log | head -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/san-$tool.log)"
done | tee "$OUT/sanitizer.txt"
echo "sanitizers done at ${SECONDS} s"
left=$((CAP - SECONDS))
if ((left > 60)); then
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $left $B/bin/kda_cuda_tests --gtest_brief=1 > /tmp/o/suite$i.txt 2>&1 &
  done
  wait
  for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]|tests ran' /tmp/o/suite$i.txt | tr '\n' ' ')"; done | tee "$OUT/suite.txt"
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/suite*.txt | sort -u | tee -a "$OUT/suite.txt"
fi
tar czf "$OUT/logs.tgz" -C /tmp/o .
