#!/usr/bin/env bash
# Call G (prepared in session 51, not run): on an H200 first the targets' grid on the tree (ladder_s49/run4/LADDER_T.txt),
# then on any card: the sanitizer matrix (111 cases, with shape 9: record and fused at q = 1 in gate mode 0) under
# racecheck on the tree's kda_tests (0 hazards expected) and on kda_tests_bugb (the planted missing barrier: hazards and
# failures expected, now in record and fused too); last an ncu profile (per-instruction stall table) of fp32 decode in gate
# mode 2 at 1536 and 3072 items (H = 12, B = 128; H = 96, B = 32) and at 24,576 (H = 96, B = 256), for the first wave's
# waits (docs/PERFORMANCE.md, Next 5 and 6). Binaries: .gpuG (git-ignored), built by build_G.sh. About 8 minutes.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuG/binG.tar.xz -C /tmp/b
case "$GPU" in *H200*)
  BIN=/tmp/b/bin OUT=$OUT/targets STAGES=ladder LADDER="$(cat docs/data/ladder_s49/run4/LADDER_T.txt)" scripts/gpu_run.sh 2>&1 | tail -1
  mkdir -p /tmp/t && tar xzf "$OUT/targets/logs.tgz" -C /tmp/t && python3 benchmarks/ladder/summarize.py /tmp/t/ladder_*.csv | tee "$OUT/targets_summary.txt" | tail -40 ;;
esac
for b in kda_tests kda_tests_bugb; do
  t=$SECONDS
  timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/bin/$b --gtest_filter='SanitizerMatrix.*' \
    --gtest_brief=1 > /tmp/$b-racecheck.log 2>&1
  echo "$b: racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' /tmp/$b-racecheck.log | tail -1) $(grep -o '\[sanitizer-matrix\] [0-9]* cases' /tmp/$b-racecheck.log) ($((SECONDS - t)) s)"
  grep "test_sanitizer_matrix.cpp:[0-9]*: " /tmp/$b-racecheck.log | sort | uniq -c | head -8
  tail -40 /tmp/$b-racecheck.log > "$OUT/$b-racecheck-tail.log"
done
BIN=/tmp/b/bin OUT=$OUT/ncu STAGES=ncu NCU_BIN=kda_bench \
  NCU_ARGS="--H 12 --B 128 --mode decode --variant auto --gate 2 --state f32 --layout sd;--H 96 --B 32 --mode decode --variant auto --gate 2 --state f32 --layout sd;--H 96 --B 256 --mode decode --variant auto --gate 2 --state f32 --layout sd" \
  scripts/gpu_run.sh 2>&1 | tail -40
