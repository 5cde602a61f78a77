#!/usr/bin/env bash
# Call F (session 47): the planner's picks on the H100: every variant forced beside `auto` (decode; verify at q = 2, 4),
# and gate modes 0 / 1 under `auto` (decode, append), for benchmarks/policy_eval.py on the development machine.
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu11/bin11.tar.xz -C /tmp/b
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="$(cat .gpu12/LADDER_F.txt)" scripts/gpu_run.sh 2>&1 | tail -5
