#!/usr/bin/env bash
# Session 65's last call: carry [".gpuZB", ".gpuPol"]. On an H200 first call ZB's own-bytes bounds (LADDER_B1 / B2,
# bounds_verdict.txt); on any card then rung `pol` (the L2 policies from libcu++'s cuda::access_property instead of
# createpolicy: the same 64-bit values, a different register allocation in the fp32 six-CTA kernel) against the tree
# (kda_bench_tree of .gpuZB), two passes in both orders (LADDER_P1 / P2): fp32 and bf16 decode / append Qr = 8 (the
# six-CTA kernels, whose state copies are evict-first) and record / fused q = 4 in gate mode 1 (the gate kernel's
# logits stores). TESTS=1 (carry .gpuPol2 too: pol's kda_cuda_tests and kda_tests) runs, instead of the ladder, pol's
# GPU tests of the kernels it changed (four shards) beside the sanitizer matrix under memcheck and racecheck.
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
if [[ ${TESTS:-0} == 1 ]]; then
  tar xJf .gpuPol2/binT.tar.xz -C /tmp && T=/tmp/bin
  F='*SharedGate*:*Bf16SixCtas*:*Bf16Narrow*:*Fp32AppendSixCtas*:*AppendThenFlush*:*AppendQr16*:*Q1KernelPerGateMode*'
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TESTS_S:-150} $T/kda_cuda_tests --gtest_brief=1 --gtest_filter="$F" \
      > /tmp/o/suite$i.txt 2>&1 &
  done
  for tool in memcheck racecheck; do
    timeout ${TESTS_S:-150} compute-sanitizer --tool $tool --error-exitcode 9 $T/kda_tests --gtest_filter='SanitizerMatrix.*' \
      --gtest_brief=1 > /tmp/o/san-$tool.log 2>&1 &
  done
  wait
  {
    for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[==========\]|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' /tmp/o/suite$i.txt | tr '\n' ' ')"; done
    grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/suite*.txt | sort -u
    for tool in memcheck racecheck; do
      echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/san-$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/san-$tool.log)"
    done
  } | tee "$OUT/checks.txt"
  tar czf "$OUT/all.tgz" -C /tmp/o .
  exit 0
fi
mkdir -p /tmp/o/P
OUT=/tmp/o/P BIN=$B/bin timeout ${CAP_P:-150} benchmarks/ladder/ladder_passes.sh $P/LADDER_P1.txt $P/LADDER_P2.txt \
  > /tmp/o/P/log.txt 2>&1
cp /tmp/o/P/ladder_summary.txt "$OUT/sum_P.txt"
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/bounds_verdict.txt" "$OUT/sum_B.txt" "$OUT/sum_P.txt" 2>/dev/null
