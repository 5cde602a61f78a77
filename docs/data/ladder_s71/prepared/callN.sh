#!/usr/bin/env bash
# Session 71's call N, carry [".gpuS71", ".kdawhl71n"] (build_N.sh: the landed tree, fd1q), in CAP seconds (default
# 560). On an H200: the targets grid (ladder_s63/prepared/LADDER_T.txt, one pass, at most 220 s), then the open decode
# targets beside their own-bytes bounds (ladder_s64/prepared/LADDER_B1.txt, at most 170 s). Then, on any card, the
# checks the tree owes: the C++ GPU suite in four shards beside the sanitizer matrix under four tools (at most 300 s),
# then the Python suite, golden and the CUDA fuzzer with the tree's wheel in what is left (call N2 runs them whole).
set -uo pipefail
CAP=${CAP:-560}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s71n && mkdir -p $B /tmp/o/T /tmp/o/B /tmp/o/C && tar xJf .gpuS71/binN.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
if [[ $GPU == *H200* ]]; then
  OUT=/tmp/o/T BIN=$B/bin timeout 220 benchmarks/ladder/ladder_passes.sh docs/data/ladder_s63/prepared/LADDER_T.txt \
    > /tmp/o/T/log.txt 2>&1
  cp /tmp/o/T/ladder_summary.txt "$OUT/sum_T.txt"; cp /tmp/o/T/ladder.tgz "$OUT/ladder_T.tgz"
  echo "targets grid done at ${SECONDS} s"
  OUT=/tmp/o/B BIN=$B/bin timeout 170 benchmarks/ladder/ladder_passes.sh docs/data/ladder_s64/prepared/LADDER_B1.txt \
    > /tmp/o/B/log.txt 2>&1
  cp /tmp/o/B/bounds_verdict.txt "$OUT/bounds_B.txt" 2>/dev/null; tar czf "$OUT/ladder_B.tgz" -C /tmp/o/B .
  echo "bounds done at ${SECONDS} s"
fi
left=$((CAP - SECONDS))
T=$((left - 40)); ((T > 300)) && T=300
if ((T > 60)); then
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $T $B/bin/kda_cuda_tests --gtest_brief=1 > /tmp/o/C/suite$i.txt 2>&1 &
  done
  for tool in memcheck racecheck synccheck initcheck; do
    timeout $T compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests --gtest_filter='SanitizerMatrix.*' \
      --gtest_brief=1 > /tmp/o/C/san-$tool.log 2>&1 &
  done
  wait
  {
    for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[==========\]|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' /tmp/o/C/suite$i.txt | tr '\n' ' ')"; done
    grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/C/suite*.txt | sort -u
    for tool in memcheck racecheck synccheck initcheck; do
      echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/C/san-$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/C/san-$tool.log)"
    done
  } | tee "$OUT/checks.txt"
  echo "checks done at ${SECONDS} s"
fi
left=$((CAP - SECONDS))
if ((left > 60)); then
  OUT=/tmp/o/C/py STAGES="pytest golden fuzz" WHEEL="$(ls .kdawhl71n/*.whl)" PYTEST_TIMEOUT=$((left / 2)) \
    FUZZ_CONFIGS=3000 FUZZ_SEED0=20261710 FUZZ_DEADLINE=$((left - 10)) timeout $left scripts/gpu_run.sh > /tmp/o/C/py.txt 2>&1
  tail -25 /tmp/o/C/py.txt | tee "$OUT/py.txt"
fi
tar czf "$OUT/checks.tgz" -C /tmp/o C
[[ -f $OUT/sum_T.txt ]] && cut -c1-200 "$OUT/sum_T.txt" | tail -60
