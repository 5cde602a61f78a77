#!/usr/bin/env bash
# benchmarks/ladder/ladder_passes.sh — a ladder run in passes (one order, then its reverse, so that no rung always
# runs first or on a warmer card): each FILE's lines ("NAME ARGS…", one run each) go through scripts/gpu_run.sh's
# ladder stage with $BIN's binaries; every pass's runs (their CSVs and text tables) are numbered on after the previous
# pass's into one folder, which is packed as $OUT/ladder.tgz and summarized (benchmarks/ladder/summarize.py) into
# $OUT/ladder_summary.txt after each pass, so that a call cut short still returns the passes it finished. Where the
# ladder has rows_prepared runs, each target against its bound over every pass so far goes to $OUT/bounds_verdict.txt
# (benchmarks/ladder/bounds_verdict.py: a rung's fastest run, kda_bench's median).
#
#   BIN=DIR OUT=DIR benchmarks/ladder/ladder_passes.sh LADDER1.txt [LADDER2.txt …]
set -uo pipefail
shopt -s nullglob
cd "$(dirname "$0")/../.."
: "${BIN:?BIN: the folder of the ladder binaries}" "${OUT:?OUT: where ladder.tgz and ladder_summary.txt go}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/all"
offset=0 pass=0
for file in "$@"; do
  pass=$((pass + 1))
  src="$work/o$pass"
  OUT="$src" STAGES=ladder LADDER="$(paste -sd';' "$file")" scripts/gpu_run.sh 2>&1 | tail -1
  if [[ -f $src/logs.tgz ]]; then  # (gpu_run.sh packs its folder where it holds more than eight files)
    mkdir -p "$work/t$pass" && tar xzf "$src/logs.tgz" -C "$work/t$pass" && src="$work/t$pass"
  fi
  for f in "$src"/ladder_*.csv "$src"/ladder_*.txt; do
    b=$(basename "$f") && ext=${b##*.} && b=${b%.*}
    [[ $b =~ _[0-9]+$ ]] || continue  # a run's file (ladder_NAME_i), not the stage's summary
    cp "$f" "$work/all/${b%_*}_$((${b##*_} + offset)).$ext"
  done
  offset=$((offset + $(wc -l < "$file")))
  tar czf "$OUT/ladder.tgz" -C "$work/all" .
  python3 benchmarks/ladder/summarize.py "$work/all"/ladder_*.csv > "$OUT/ladder_summary.txt" 2>&1
  rp=("$work/all"/ladder_rows_prepared_*.txt)
  ((${#rp[@]} == 0)) || python3 benchmarks/ladder/bounds_verdict.py "$work/all" > "$OUT/bounds_verdict.txt" 2>&1
done
