#!/usr/bin/env bash
# Session 69's calls A and B in one, carry [".gpuS69", ".kdawhl"]: call A (the rungs' tests and ladder; on an H200 the
# targets grid and bounds too, in all of CAP) in at most CAP_A seconds, then, off an H200, call B's checks in what is left of CAP.
set -uo pipefail
CAP=${CAP:-560}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
CAP_A=${CAP_A:-300}; [[ $GPU == *H200* ]] && CAP_A=$CAP
CAP=$CAP_A bash docs/data/ladder_s69/prepared/callA.sh
left=$((CAP - SECONDS))
if [[ $GPU != *H200* ]] && ((left > 120)); then
  echo "call B at ${SECONDS} s, ${left} s left"
  T=$(( (left - 20) * 3 / 5 ))
  TESTS_S=$T CAP=$((left - 10)) bash docs/data/ladder_s69/prepared/callB.sh > /tmp/callB.txt 2>&1
  tail -30 /tmp/callB.txt
fi
