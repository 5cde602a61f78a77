#!/usr/bin/env bash
# Call V. On an H200: session 54's prepared calls U (the decode bounds at the step's own bytes, `rowsio` / `moveio`,
# beside the step at 384–6144 items; carry .gpuT), the same bounds at 6144–24,576 items beside gate mode 2 and `auto`
# (LADDER_V1.txt, V2), and S (`sm2`, `pfa`, `pft` and the issues' targets grid; carry
# .gpuS), each under its own folder of $OUT. An H100 has run both (run 1 of session 55): there the call ends at once,
# or with H100_CHECKS=1 runs the Python suite and golden on the GPU with the tree's wheel (carry .whl55:
# `KDA_CUDA_ARCHS=90a python3.12 -m pip wheel --no-deps -w .whl55 .`), the one check the tree had not passed on a GPU.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
P=docs/data/ladder_s54/prepared D=docs/data/ladder_s55/prepared
if [[ $GPU == *H200* ]]; then
  mkdir -p "$OUT/U" "$OUT/S"
  OUT=$OUT/U bash $P/callU.sh > "$OUT/U/call.txt" 2>&1
  # the own-bytes bounds from 6144 items (LADDER_V1.txt, V2: 6144, 12,288, 24,576 items, gate mode 2 and `auto`),
  # two passes in both orders, with call U's binaries (.gpuT, unpacked to /tmp/b by callU.sh)
  mkdir -p "$OUT/V"
  BIN=/tmp/b/bin OUT=$OUT/V benchmarks/ladder/ladder_passes.sh $D/LADDER_V1.txt $D/LADDER_V2.txt > "$OUT/V/call.txt" 2>&1
  OUT=$OUT/S timeout $((570 - SECONDS)) bash $P/callS.sh > "$OUT/S/call.txt" 2>&1
  cat "$OUT/U/bounds_verdict.txt" "$OUT/V/bounds_verdict.txt"; cat "$OUT/V/ladder_summary.txt"; tail -45 "$OUT/S/call.txt"
  # the device returns at most 8 files: the folders as one archive
  tar czf "$OUT/h200.tgz" -C "$OUT" U V S && rm -rf "$OUT/U" "$OUT/V" "$OUT/S"
elif [[ ${H100_CHECKS:-0} == 1 ]]; then
  mkdir -p "$OUT/V"
  OUT=$OUT/V STAGES="pytest golden" WHEEL="$(ls .whl55/*.whl)" PYTEST_TIMEOUT=420 scripts/gpu_run.sh > /tmp/v_run.txt 2>&1
  cp /tmp/v_run.txt "$OUT/run.txt"; tail -25 /tmp/v_run.txt
else
  echo "an H100: nothing left to run here"
fi
