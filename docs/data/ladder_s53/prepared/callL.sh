#!/usr/bin/env bash
# Call L (session 53): the tree with kConvWeightsBeforeWait and kFirstStagesAfterWindow (kda_bench_new) against the tree
# before them (kda_bench, session 52's), two passes in both orders (LADDER_L1.txt, LADDER_L2.txt): fp32 decode gate
# mode 2 and `auto` at 384–24,576 items, gate mode 0 at 3072, bf16 `auto` at 768–24,576; then the C++ GPU suite, the
# planted bug (bug_swapped_bias.diff: the q and k conv biases swapped where the taps are loaded before the wait) under
# the q = 1 tests, and the sanitizer matrix under memcheck and racecheck. Binaries: .gpuL (build_L.sh). About 8 minutes.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuL/binL.tar.xz -C /tmp/b
D=docs/data/ladder_s53/prepared
n=$(wc -l < $D/LADDER_L1.txt)
mkdir -p /tmp/all
for pass in 1 2; do
  BIN=/tmp/b/bin OUT=/tmp/o$pass STAGES=ladder LADDER="$(paste -sd';' $D/LADDER_L$pass.txt)" scripts/gpu_run.sh 2>&1 | tail -1
  mkdir -p /tmp/t$pass && tar xzf /tmp/o$pass/logs.tgz -C /tmp/t$pass
  for f in /tmp/t$pass/ladder_*.csv; do b=$(basename "$f" .csv); i=${b##*_}; cp "$f" "/tmp/all/${b%_*}_$((i + (pass - 1) * n)).csv"; done
  tar czf "$OUT/ladder.tgz" -C /tmp/all .
  python3 benchmarks/ladder/summarize.py /tmp/all/ladder_*.csv > "$OUT/ladder_summary.txt" 2>&1
done
timeout 60 /tmp/b/bin/kda_cuda_tests_bug --gtest_brief=1 --gtest_filter='CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.Bf16SixCtasPerSmWide' > "$OUT/tests_bug.txt" 2>&1
echo "planted bug: rc=$? $(grep -c 'Failure' "$OUT/tests_bug.txt") failures; $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/tests_bug.txt" | tr '\n' ' ')"
t=$SECONDS
timeout 280 /tmp/b/bin/kda_cuda_tests --gtest_brief=1 > "$OUT/cuda_tests.txt" 2>&1
echo "kda_cuda_tests rc=$? ($((SECONDS - t)) s): $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/cuda_tests.txt" | tr '\n' ' ')"
grep -E "^\[  FAILED" "$OUT/cuda_tests.txt" | head
for tool in racecheck memcheck; do
  t=$SECONDS
  timeout 110 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/b/bin/kda_tests --gtest_filter='SanitizerMatrix.*' \
    --gtest_brief=1 > /tmp/san-$tool.log 2>&1
  echo "sanitizer matrix $tool: rc=$? $(grep -E '(RACECHECK|ERROR) SUMMARY' /tmp/san-$tool.log | tail -1) $(grep -o '\[sanitizer-matrix\] [0-9]* cases' /tmp/san-$tool.log) ($((SECONDS - t)) s)" | tee -a "$OUT/sanitizer.txt"
  tail -15 /tmp/san-$tool.log > "$OUT/san-$tool-tail.log"
done
echo "--- ladder"; tail -40 "$OUT/ladder_summary.txt"
