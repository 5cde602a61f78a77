#!/usr/bin/env bash
# Call G (session 47): Split against Wide for the verify kinds at up to 12 items (the tables' first rule), q = 1 ... 16.
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu11/bin11.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$(cat .gpu12/LADDER_G.txt)" scripts/gpu_run.sh 2>&1 | tail -3
