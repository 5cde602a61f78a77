#!/usr/bin/env bash
# Call F (session 51): rungs pfa / pft (the item's later state chunks prefetched into L2 by a bulk prefetch right after
# the first stages' copies: by every CTA / by the grid's last 1056 CTAs; KDA_STEP_OWN_PREFETCH_TAIL) against the tree
# (LADDER_PF1.txt, LADDER_PF2.txt: fp32 decode gate mode 2 and `auto`, bf16 decode, fp32 append Qr = 8 / 16, record / fused q = 4 at H = 96; two passes, both orders);
# a planted missing barrier
# (kda_tests_bugb: the recording kinds' Wide q = 1 kernels skip the staged-inputs barrier in gate mode 0 too, where
# the F_B dot reads f_a staged by other threads) under racecheck on the sanitizer matrix: it must report hazards;
# last, on an H200, the targets' grid on the tree (ladder_s49/run4/LADDER_T.txt).
# Binaries: .gpuF (git-ignored), built by docs/data/ladder_s51/prepared/build_F.sh.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuF/binF.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT/pass1 STAGES=ladder LADDER="$(cat docs/data/ladder_s51/prepared/LADDER_PF1.txt)" scripts/gpu_run.sh 2>&1 | tail -1
BIN=/tmp/b/bin OUT=$OUT/pass2 STAGES=ladder LADDER="$(cat docs/data/ladder_s51/prepared/LADDER_PF2.txt)" scripts/gpu_run.sh 2>&1 | tail -1
t=$SECONDS
if ((SECONDS < 240)); then
timeout 170 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/bin/kda_tests_bugb --gtest_filter='SanitizerMatrix.*' \
  --gtest_brief=1 > /tmp/bugb-racecheck.log 2>&1
echo "planted barrier: racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' /tmp/bugb-racecheck.log | tail -1) ($((SECONDS - t)) s)"
grep -m 3 -A 4 "Race reported\|Error: Race" /tmp/bugb-racecheck.log
tail -40 /tmp/bugb-racecheck.log > "$OUT/bugb-racecheck-tail.log"; gzip -c /tmp/bugb-racecheck.log | head -c 3000000 > "$OUT/bugb-racecheck.log.gz"
else echo "planted barrier: racecheck skipped (the ladder took ${SECONDS} s)"; fi
# (gpu_run.sh packs each pass's files into logs.tgz)
for d in pass1 pass2; do mkdir -p "/tmp/ladder/$d" && tar xzf "$OUT/$d/logs.tgz" -C "/tmp/ladder/$d"; done
python3 benchmarks/ladder/summarize.py /tmp/ladder/pass*/ladder_*.csv 2>&1 | tee "$OUT/ladder_summary.txt" | tail -70
((SECONDS < 420)) && case "$GPU" in *H200*)
  BIN=/tmp/b/bin OUT=$OUT/targets STAGES=ladder LADDER="$(cat docs/data/ladder_s49/run4/LADDER_T.txt)" scripts/gpu_run.sh 2>&1 | tail -1 ;;
esac
