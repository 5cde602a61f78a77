#!/usr/bin/env bash
# Call ZB (an H200): carry [".gpuZB", ".whl"] (build_ZB.sh; .whl: fla 0.5.2's two wheels). The tree with rung zh
# landed. Checks side by side: its C++ GPU suite in four shards (SUITE_FILTER: a gtest filter) and its sanitizer
# matrix under the four tools. Then fp32 append against the tree before the logits rule (LADDER_A1 / A2:
# kda_bench_tree against kda_bench_pre and kda_bench_na at H = 48, 96 x B = 64, 256, decode and append Qr = 8, 16,
# gate modes `auto` and 2; session 64's first targets grid had append 4-5% slower at B = 256 than session 55's).
# Then the open decode targets against their bounds at the step's own bytes in the same run (LADDER_B1 / B2, the
# second pass reversed; bounds_verdict.txt): `rows_prepared --io` (rowsio, rowsio/1) beside fp32 `auto` and gate
# mode 2 at H = 48, B = 128 / 256 and H = 96, B = 64 / 128 / 256 (`auto` <= 1.08 x floor), `rows_prepared --bf16`
# (rows16io, rows16io/4) beside bf16 `auto` and gate mode 2 at H = 24, B = 256, H = 48, B = 128 / 256 and H = 96,
# B = 64 (<= 1.15 x floor). Then fla's per-token verify chain (benchmarks/fla_chain.py) beside per_token q = 4 at
# H = 32, 96 x B = 8, 64, 256 (<= 0.5 x fla: the H200 last measured in session 23). In what CAP (default 520 s)
# leaves, in that order. On another card: the checks and LADDER_A only. H200_ONLY=1: on another card run nothing (the
# H100 branch ran as run 2), or with H100_CHECKS=1 the Python suite, golden and the CUDA fuzzer (3000 configurations)
# with the tree's wheel (carry .kdawhl: `KDA_CUDA_ARCHS=90a python3.12 -m pip wheel --no-deps -w .kdawhl .`);
# SKIP_CHECKS=1: no C++ checks (run 2 had them).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
if [[ ${H200_ONLY:-0} == 1 && $GPU != *H200* ]]; then
  if [[ ${H100_CHECKS:-0} == 1 ]]; then
    OUT=$OUT STAGES="pytest golden fuzz" WHEEL="$(ls .kdawhl/*.whl)" PYTEST_TIMEOUT=${PYTEST_S:-300} FUZZ_CONFIGS=3000 \
      FUZZ_SEED0=20261640 FUZZ_DEADLINE=${CAP:-520} scripts/gpu_run.sh > /tmp/h100_run.txt 2>&1
    cp /tmp/h100_run.txt "$OUT/run.txt"; tail -25 /tmp/h100_run.txt
  else
    echo "not an H200: nothing run"
  fi
  exit 0
fi
CAP=${CAP:-520}
B=/tmp/zb && mkdir -p $B /tmp/o && tar xJf .gpuZB/binZB.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
P=docs/data/ladder_s64/prepared
for i in $( ((${SKIP_CHECKS:-0})) || echo 0 1 2 3); do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TESTS_S:-200} $B/bin/kda_cuda_tests --gtest_brief=1 --gtest_filter="${SUITE_FILTER:-*}" \
    > /tmp/o/suite$i.txt 2>&1 &
done
for tool in $( ((${SKIP_CHECKS:-0})) || echo ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}); do
  timeout ${SAN_S:-200} compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests \
    --gtest_filter='SanitizerMatrix.*' --gtest_brief=1 > /tmp/o/san-$tool.log 2>&1 &
done
wait
((${SKIP_CHECKS:-0})) || {
  for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[==========\]|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' /tmp/o/suite$i.txt | tr '\n' ' ')"; done
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/suite*.txt | sort -u
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
    echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/san-$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/san-$tool.log)"
  done
} | tee "$OUT/checks.txt"
echo "checks done at ${SECONDS} s"
left=$((CAP - SECONDS))
if ((left > 30)); then
  mkdir -p /tmp/o/A
  OUT=/tmp/o/A BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $P/LADDER_A1.txt $P/LADDER_A2.txt \
    > /tmp/o/A/log.txt 2>&1
  cp /tmp/o/A/ladder_summary.txt "$OUT/sum_A.txt" 2>/dev/null
fi
left=$((CAP - SECONDS))
if [[ $GPU == *H200* ]] && ((left > 30)); then
  mkdir -p /tmp/o/P
  OUT=/tmp/o/P BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $P/LADDER_B1.txt $P/LADDER_B2.txt \
    > /tmp/o/P/log.txt 2>&1
  cp /tmp/o/P/ladder_summary.txt "$OUT/sum_B.txt" 2>/dev/null
  cp /tmp/o/P/bounds_verdict.txt "$OUT/bounds_verdict.txt" 2>/dev/null
fi
left=$((CAP - SECONDS))
if [[ $GPU == *H200* ]] && ((left > 30)); then
  mkdir -p /tmp/o/F
  OUT=/tmp/o/F BIN=$B/bin STAGES="fla ladder" FLA_ARGS="--mode per_token --q 4 --H 32,96 --B 8,64,256" \
    LADDER="$(paste -sd';' $P/LADDER_F.txt)" timeout $left scripts/gpu_run.sh > /tmp/o/F/log.txt 2>&1
  { cat /tmp/o/F/fla.txt; tail -12 /tmp/o/F/log.txt; } > "$OUT/fla.txt" 2>/dev/null
fi
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/sum_A.txt" "$OUT/bounds_verdict.txt" "$OUT/sum_B.txt" "$OUT/fla.txt" 2>/dev/null
