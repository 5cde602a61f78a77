#!/usr/bin/env bash
# Call ZP (any card): carry [".gpuZP"] (build_ZP.sh). It supersedes call Z (rungs zd / zl): the product form of
# rung zl (product_zl.diff), so that a win lands as it was measured. Checks side by side: the product's whole C++ GPU
# suite in four shards, its sanitizer matrix under the four tools and a planted bug's gate mode 1 tests (zpb: the
# logits dropped before they are read; they must fail); then LADDER_P1 / P2 (the product against the tree: bf16 and
# fp32 decode, fp32 append Qr = 8, record and fused q = 4, all in `auto`, which takes gate mode 1 there; two passes,
# the second reversed) and LADDER_Z3 (the tree in gate mode 2: what gate mode 1 still costs) in what CAP (default
# 420 s) leaves. TESTS_S, SAN_S (s) and SAN_TOOLS bound the checks (SAN_TOOLS=" " skips the matrix).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
CAP=${CAP:-420}
B=/tmp/zp && mkdir -p $B /tmp/o && tar xJf .gpuZP/binZP.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
P=docs/data/ladder_s61/prepared
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TESTS_S:-200} $B/bin/kda_cuda_tests_zp --gtest_brief=1 \
    > /tmp/o/suite$i.txt 2>&1 &
done
timeout 120 $B/bin/kda_cuda_tests_zpb --gtest_brief=1 \
  --gtest_filter='CudaVsCpu.SharedGateEveryStepKind:CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.GraphCaptureAndReplay' \
  > /tmp/o/plant.txt 2>&1 &
for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
  timeout ${SAN_S:-200} compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests_zp \
    --gtest_filter='SanitizerMatrix.*' --gtest_brief=1 > /tmp/o/san-$tool.log 2>&1 &
done
wait
{
  for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]|tests ran' /tmp/o/suite$i.txt | tr '\n' ' ')"; done
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/suite*.txt | sort -u
  echo "planted zpb (must fail): $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]|tests ran' /tmp/o/plant.txt | tr '\n' ' ')"
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
    echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/san-$tool.log | tail -1) $(grep -o '\[sanitizer-matrix\].*' /tmp/o/san-$tool.log | head -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/san-$tool.log)"
  done
} | tee "$OUT/checks.txt"
echo "checks done at ${SECONDS} s"
left=$((CAP - SECONDS))
if ((left > 40)); then
  mkdir -p /tmp/o/P
  OUT=/tmp/o/P BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $P/LADDER_P1.txt $P/LADDER_P2.txt \
    $P/LADDER_Z3.txt > /tmp/o/P/log.txt 2>&1
  cp /tmp/o/P/ladder_summary.txt "$OUT/sum_P.txt" 2>/dev/null
fi
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/sum_P.txt" 2>/dev/null
