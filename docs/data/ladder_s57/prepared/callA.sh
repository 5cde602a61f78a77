#!/usr/bin/env bash
# Call A (session 57; any card). On an H200: the narrow forms' tests, then the ladder LADDER_A1 / A2 (two passes, the
# second reversed): bf16 decode of the tree (the narrow form by the planner's rule) and of the tree with --narrow off
# (the six-CTA form), fp32 decode of the tree and of rung nf (the fp32 narrow form: 128-thread CTAs, eight per SM,
# 16-row chunks; --narrow on), 768–24,576 items, gate modes auto and 2. On another card: the narrow forms' tests, the
# tree's whole C++ GPU suite (four shards), racecheck and memcheck on the fp32 narrow form's test, and the fp32 half
# of the ladder (LADDER_A3 / A4). Everywhere: the planted bug (pb: the narrow form's v conv takes the q channel's x),
# whose narrow-form tests must fail. Session 58 added vf (session 56's rung: the narrow form's v conv before the q / k
# conv, rebuilt on the tree): its narrow-form tests and bf16 decode against the tree, two passes (LADDER_A5 / A6), on
# an H200 after A1 / A2, and with VF_ONLY=1 on another card after the tree's GPU suite, while CAP's seconds last.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuA/binA.tar.xz -C /tmp/b
D=docs/data/ladder_s57/prepared
narrow_tests() {  # NAME BINARY
  timeout 150 "$2" --gtest_filter='CudaVsCpu.*Narrow*' --gtest_brief=1 > "$OUT/tests_$1.txt" 2>&1
  echo "tests $1: rc $? $(grep -cE '^\[  FAILED  \] CudaVsCpu' "$OUT/tests_$1.txt") failed; $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_$1.txt" | tr '\n' ' ')"
}
ladder_until_cap() {  # CAP_DEFAULT LADDER1 LADDER2: the passes in the seconds left of CAP, none where under 40 are
  local left=$((${CAP:-$1} - SECONDS))
  ((left > 40)) || { echo "ladder $2: no time left (CAP)"; return; }
  BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh "$2" "$3"
  cat "$OUT/ladder_summary.txt"
}
if [[ $GPU == *H200* ]]; then
  narrow_tests nf /tmp/b/bin/kda_cuda_tests_nf
  narrow_tests pb /tmp/b/bin/kda_cuda_tests_pb
  narrow_tests vf /tmp/b/bin/kda_cuda_tests_vf
  BIN=/tmp/b/bin timeout 260 benchmarks/ladder/ladder_passes.sh $D/LADDER_A1.txt $D/LADDER_A2.txt
  cat "$OUT/ladder_summary.txt"
  mv "$OUT/ladder_summary.txt" "$OUT/ladder_summary_A12.txt" && mv "$OUT/ladder.tgz" "$OUT/ladder_A12.tgz"
  ladder_until_cap 540 $D/LADDER_A5.txt $D/LADDER_A6.txt
elif [[ ${VF_ONLY:-0} == 1 ]]; then  # (session 58: the other card's branch below ran in session 57's run 1)
  narrow_tests vf /tmp/b/bin/kda_cuda_tests_vf
  narrow_tests pb /tmp/b/bin/kda_cuda_tests_pb
  BIN=/tmp/b/bin OUT=$OUT/v STAGES="cuda" GTEST_SHARDS=4 GTEST_TIMEOUT=150 scripts/gpu_run.sh 2>&1 | grep '^== '
  tar czf "$OUT/v.tgz" -C "$OUT" v && rm -rf "$OUT/v"
  ladder_until_cap 400 $D/LADDER_A5.txt $D/LADDER_A6.txt
else
  narrow_tests pb /tmp/b/bin/kda_cuda_tests_pb
  narrow_tests nf /tmp/b/bin/kda_cuda_tests_nf
  BIN=/tmp/b/bin OUT=$OUT/v STAGES="cuda" GTEST_SHARDS=4 GTEST_TIMEOUT=180 scripts/gpu_run.sh 2>&1 | grep '^== '
  for tool in racecheck memcheck; do
    timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 /tmp/b/bin/kda_cuda_tests_nf \
      --gtest_filter=CudaVsCpu.F32NarrowForm > "$OUT/v/san_$tool.txt" 2>&1; echo "$tool (nf) rc $?: $(tail -1 "$OUT/v/san_$tool.txt")"
  done
  tar czf "$OUT/v.tgz" -C "$OUT" v && rm -rf "$OUT/v"
  left=$((330 - SECONDS))
  if ((left > 30)); then
    BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh $D/LADDER_A3.txt $D/LADDER_A4.txt
    cat "$OUT/ladder_summary.txt"
  fi
fi
