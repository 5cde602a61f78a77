#!/usr/bin/env bash
# Call Z (session 61; any card): carry [".gpuZ"] (build_Z.sh). Checks side by side: zl's GPU tests of the gate mode 1
# and q = 1 forms (graphs and repeated steps among them: the logits dropped after each step) and the tree's sanitizer
# matrix under the four tools (the narrow form's ring changed in session 60); then LADDER_Z1 / Z2 (zd and zl against
# the tree: bf16 and fp32 decode in `auto`, which takes gate mode 1 there; two passes, the second reversed) in what
# CAP (default 330 s) leaves; Z3=1 adds LADDER_Z3 (the tree in gate mode 2: what mode 1 still costs), ZX=1 two more
# passes (Z2, Z1) after it. TESTS_S, SAN_S (s) and SAN_TOOLS bound the checks.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
CAP=${CAP:-330}
B=/tmp/z && mkdir -p $B /tmp/o && tar xJf .gpuZ/binZ.tar.xz -C $B
P=docs/data/ladder_s61/prepared
F='CudaVsCpu.SharedGateEveryStepKind:CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.Bf16NarrowForm:CudaVsCpu.Bf16NarrowFormEqualsSixCtaForm'
F+=':CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.GraphCaptureAndReplay:CudaVsCpu.SharedGateStepsAfterASlowProducer'
F+=':CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.Fp32AppendSixCtasPerSmWide'
for i in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i timeout ${TESTS_S:-150} $B/bin/kda_cuda_tests_zl --gtest_filter="$F" --gtest_brief=1 > /tmp/o/tests_zl$i.txt 2>&1 &
done
for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
  timeout ${SAN_S:-170} compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests --gtest_filter='SanitizerMatrix.*' \
    --gtest_brief=1 > /tmp/o/san-$tool.log 2>&1 &
done
wait
{
  for i in 0 1; do echo "tests zl shard $i: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]|tests ran' /tmp/o/tests_zl$i.txt | tr '\n' ' ')"; done
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/tests_zl*.txt | sort -u
  for tool in ${SAN_TOOLS:-memcheck racecheck synccheck initcheck}; do
    echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/san-$tool.log | tail -1) $(grep -o '\[sanitizer-matrix\].*' /tmp/o/san-$tool.log | head -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/san-$tool.log)"
  done
} | tee "$OUT/checks.txt"
echo "checks done at ${SECONDS} s"
left=$((CAP - SECONDS))
if ((left > 40)); then
  mkdir -p /tmp/o/Z
  OUT=/tmp/o/Z BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $P/LADDER_Z1.txt $P/LADDER_Z2.txt ${Z3:+$P/LADDER_Z3.txt} ${ZX:+$P/LADDER_Z2.txt $P/LADDER_Z1.txt} > /tmp/o/Z/log.txt 2>&1
  cp /tmp/o/Z/ladder_summary.txt "$OUT/sum_Z.txt" 2>/dev/null
fi
tar czf "$OUT/all.tgz" -C /tmp/o .
cat "$OUT/sum_Z.txt" 2>/dev/null
