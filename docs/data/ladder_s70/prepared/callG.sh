#!/usr/bin/env bash
# Session 70's call G, carry [".gpuS70", ".kdawhl70"] (build_G.sh builds both: the binaries, and the wheel of the
# tree with rung fd), in CAP seconds (default 560).
# 1. LADDER_G1 / G2 (two passes, the second reversed), at most CAP_G seconds (default 300): the tree with rung fd
#    (`new`) against the tree before it (`old`): fp32 append Qr = 8, 12, 16 on 88 SMs (the H200 proxy), Qr = 8, 16 on
#    the whole card, fused and record q = 4 at H = 96 x B = 1, 2, 6, 64, fused q = 1, 2, bf16 append and bf16 fused
#    q = 3, 4. On an H200 the whole card's lines only (at most 150 s), then the targets grid on `new` (at most 200 s).
# 2. The checks on `new`: the C++ GPU suite in four shards beside the sanitizer matrix under the four tools (TESTS_S
#    each, side by side; default what CAP leaves, at most 300 s); the recording kinds' error test on the two planted
#    bugs (each must fail); the Python suite, golden and the CUDA fuzzer only if more than 60 s are left (else call G2).
set -uo pipefail
CAP=${CAP:-560}
P=docs/data/ladder_s70/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s70g && mkdir -p $B /tmp/o/G /tmp/o/C && tar xJf .gpuS70/binG.tar.xz -C $B && cat $B/bin/commit.txt
L1=$P/LADDER_G1.txt L2=$P/LADDER_G2.txt CAP_G=${CAP_G:-300}
H200=0; [[ $GPU == *H200* ]] && H200=1
if ((H200)); then
  grep -v -- '--sms' $P/LADDER_G1.txt > /tmp/o/G/L1.txt; tac /tmp/o/G/L1.txt > /tmp/o/G/L2.txt
  L1=/tmp/o/G/L1.txt L2=/tmp/o/G/L2.txt CAP_G=150
fi
OUT=/tmp/o/G BIN=$B/bin timeout $CAP_G benchmarks/ladder/ladder_passes.sh $L1 $L2 > /tmp/o/G/log.txt 2>&1
cp /tmp/o/G/ladder_summary.txt "$OUT/sum_G.txt"; cp /tmp/o/G/ladder.tgz "$OUT/ladder_G.tgz"
echo "ladder G done at ${SECONDS} s"
if ((H200)); then
  mkdir -p /tmp/o/T
  OUT=/tmp/o/T BIN=$B/bin timeout 200 benchmarks/ladder/ladder_passes.sh docs/data/ladder_s63/prepared/LADDER_T.txt \
    > /tmp/o/T/log.txt 2>&1
  cp /tmp/o/T/ladder_summary.txt "$OUT/sum_T.txt"; cp /tmp/o/T/ladder.tgz "$OUT/ladder_T.tgz"
  echo "targets grid done at ${SECONDS} s"
fi
left=$((CAP - SECONDS))
T=${TESTS_S:-$((left - 40))}; ((T > 300)) && T=300
if ((T > 30)); then
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $T $B/bin/kda_cuda_tests --gtest_brief=1 > /tmp/o/C/suite$i.txt 2>&1 &
  done
  for tool in memcheck racecheck synccheck initcheck; do
    timeout $T compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests --gtest_filter='SanitizerMatrix.*' \
      --gtest_brief=1 > /tmp/o/C/san-$tool.log 2>&1 &
  done
  wait
  for n in pl1 pl2; do  # planted bugs: the error test must fail on each
    timeout 40 $B/bin/kda_cuda_tests_$n --gtest_filter='CudaVsCpu.ErrorFlagsOnDeviceRecordingKinds' > /tmp/o/C/plant_$n.txt 2>&1
  done
  {
    for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[==========\]|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' /tmp/o/C/suite$i.txt | tr '\n' ' ')"; done
    grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/C/suite*.txt | sort -u
    for tool in memcheck racecheck synccheck initcheck; do
      echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/C/san-$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/C/san-$tool.log)"
    done
    for n in pl1 pl2; do
      echo "planted $n (must fail): $(grep -E '^\[  (PASSED|FAILED) ' /tmp/o/C/plant_$n.txt | tr '\n' ' ') $(grep -m2 -E 'Failure|Which is' /tmp/o/C/plant_$n.txt | tr '\n' ' ' | cut -c1-200)"
    done
  } | tee "$OUT/checks.txt"
  echo "checks done at ${SECONDS} s"
fi
left=$((CAP - SECONDS))
if ((left > 60)); then
  OUT=/tmp/o/C/py STAGES="pytest golden fuzz" WHEEL="$(ls .kdawhl70/*.whl)" PYTEST_TIMEOUT=$((left / 2)) FUZZ_CONFIGS=3000 \
    FUZZ_SEED0=20261700 FUZZ_DEADLINE=$((left - 10)) timeout $left scripts/gpu_run.sh > /tmp/o/C/py.txt 2>&1
  tail -25 /tmp/o/C/py.txt | tee "$OUT/py.txt"
fi
tar czf "$OUT/checks.tgz" -C /tmp/o C
cat "$OUT/sum_G.txt"
