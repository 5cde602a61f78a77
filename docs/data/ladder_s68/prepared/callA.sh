#!/usr/bin/env bash
# Session 68's call A, carry [".gpuZD", ".gpuS67", ".gpuZB", ".whl", ".gpuZC"]: on an H200, session 67's call H without its
# tests (h5's append lines on the whole card, then call ZB's H200 part); on another card, session 66's call ZF (ncu of
# fp32 append Qr = 8 at H = 96, B = 256 on 88 SMs and on the whole card, with the SASS tables).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ $GPU == *H200* ]]; then
  TESTS_S=1 MATRIX_S=1 MEMCHECK_S=1 CAP=${CAP:-560} bash docs/data/ladder_s67/prepared/callH.sh
else
  CAP=${CAP:-400} bash docs/data/ladder_s66/prepared/callZF.sh
fi
