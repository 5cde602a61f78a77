#!/usr/bin/env bash
# Call H (session 52): 1. the timeline of decode steps (kda_bench_tl --dump-out, benchmarks/ladder/timeline.py):
# where the fixed cost per step goes (the handoff between steps, the fill, the drain), fp32 gate mode 2 at 768–24,576
# items, `auto` and bf16 at two sizes, the tree's kda_bench at the same points beside it; 2. the sanitizer matrix
# (111 cases, its tenth shape: record / fused at q = 1 in gate mode 0) under racecheck on the tree's kda_tests
# (0 hazards expected); 3. ncu stall tables of fp32 decode in gate mode 2 at 1536, 3072 and 24,576 items; 4. racecheck
# on kda_tests_bugb (the planted missing barrier: hazards and failures expected). Binaries: .gpuH, built by build_H.sh.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuH/binH.tar.xz -C /tmp/b
export PYTHONDONTWRITEBYTECODE=1
mkdir -p "$OUT/timeline" /tmp/tl
P="--layout sd --peer docs/data/vllm_k3_decode_h200.csv"
while read -r tag args; do
  for bin in kda_bench kda_bench_tl; do
    extra=""; [ $bin = kda_bench_tl ] && extra="--dump-out /tmp/tl/$tag"
    /tmp/b/bin/$bin $args --variant auto $P $extra 2>&1 | sed "s/^/$bin: /" >> "$OUT/timeline/bench.txt"
  done
done <<'PTS'
g2 --H 12 --B 128 --mode decode --gate 2 --state f32
g2 --H 96 --B 8,32,64,256 --mode decode --gate 2 --state f32
g0 --H 96 --B 32,256 --mode decode --gate 0 --state f32
g2 --H 96 --B 64,256 --mode decode --gate 2 --state bf16
PTS
for f in /tmp/tl/*.bin; do python3 benchmarks/ladder/timeline.py "$f"; done > "$OUT/timeline/timeline.txt" 2>&1
for f in /tmp/tl/*.bin; do [ "$(stat -c %s "$f")" -lt 8000000 ] && xz -c "$f" > "$OUT/timeline/$(basename "$f").xz"; done
grep -E "^/tmp|period|handoff|drain|empty|resident at release|launched later" "$OUT/timeline/timeline.txt"
for b in kda_tests kda_tests_bugb; do
  t=$SECONDS
  timeout 170 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/bin/$b --gtest_filter='SanitizerMatrix.*' \
    --gtest_brief=1 > /tmp/$b-racecheck.log 2>&1
  echo "$b: racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' /tmp/$b-racecheck.log | tail -1) $(grep -o '\[sanitizer-matrix\] [0-9]* cases' /tmp/$b-racecheck.log) ($((SECONDS - t)) s)" | tee -a "$OUT/racecheck.txt"
  grep "test_sanitizer_matrix.cpp:[0-9]*: " /tmp/$b-racecheck.log | sort | uniq -c | head -8 | tee -a "$OUT/racecheck.txt"
  tail -40 /tmp/$b-racecheck.log > "$OUT/$b-racecheck-tail.log"
  [ $b = kda_tests ] && BIN=/tmp/b/bin OUT=$OUT/ncu STAGES=ncu NCU_BIN=kda_bench \
    NCU_ARGS="--H 12 --B 128 --mode decode --variant auto --gate 2 --state f32 --layout sd;--H 96 --B 32 --mode decode --variant auto --gate 2 --state f32 --layout sd;--H 96 --B 256 --mode decode --variant auto --gate 2 --state f32 --layout sd" \
    scripts/gpu_run.sh 2>&1 | tail -12
done
echo "--- timeline"; grep -E "^/tmp|period|handoff|drain \(|empty" "$OUT/timeline/timeline.txt"
