#!/usr/bin/env bash
# Call D (session 47): the merged tree (main with nc2b; binaries of .gpu11) under synccheck and initcheck on the
# sanitizer matrix, then the targets' grid on whatever card the call gets (decode gate 2 / auto, bf16, append, verify).
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu11/bin11.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT STAGES="sanitizer ladder" SANITIZER_SETS=matrix SANITIZER_TOOLS="synccheck initcheck" \
  LADDER="$(cat .gpu12/LADDER12.txt)" scripts/gpu_run.sh 2>&1 | tail -150
