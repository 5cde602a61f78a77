#!/usr/bin/env bash
# benchmarks/ladder/sass_same.sh — is a change free for the kernels it should not touch? Compiles the named kernel
# instantiations (src/cuda/inst/NAME.cu) from the working tree and from REV, without line info (with -lineinfo a
# header's line layout alone can move instructions), and compares their SASS instruction for instruction
# (cuobjdump: CUDA's bin, or the nvidia-cuda-cuobjdump wheel's). Uses BUILD's compile commands (default build/gpu).
#
#   benchmarks/ladder/sass_same.sh REV NAME… # e.g. HEAD~1 step_split1_f32_q1_nofb ws_bf16
# Prints "NAME same (N instructions)", "NAME DIFFERS" or "NAME not compiled …"; exits 1 unless every NAME is the same.
set -uo pipefail
cd "$(dirname "$0")/../.."
rev=${1:?REV}; shift
BUILD=${BUILD:-build/gpu}
command -v cuobjdump >/dev/null || { echo "cuobjdump: not on PATH" >&2; exit 2; }
work=$(mktemp -d)
trap 'git worktree remove --force "$work/rev" >/dev/null 2>&1; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/rev" "$rev" || exit 2
root=$PWD
compile() {  # SRC_ROOT OUT INST
  local cmd
  cmd=$(ninja -C "$BUILD" -t commands kda_core | grep " -c [^ ]*inst/$3.cu ") || { echo "no instantiation $3" >&2; return 2; }
  cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//; s/ -lineinfo//g' <<<"$cmd")
  cmd=${cmd//$root\//$1/}
  (cd "$BUILD" && eval "$cmd -o $2") &&
    cuobjdump -sass "$2" | grep -E '^\s+/\*[0-9a-f]{4,6}\*/' | sed -E 's#/\* 0x[0-9a-f]+ \*/##' > "$2.sass"
}
rc=0
for inst in "$@"; do
  compile "$root" "$work/new_$inst.o" "$inst" 2>/dev/null & compile "$work/rev" "$work/old_$inst.o" "$inst" 2>/dev/null &
  wait
  if [[ ! -s $work/new_$inst.o.sass || ! -s $work/old_$inst.o.sass ]]; then
    echo "$inst not compiled (here or at $rev)"; rc=1
  elif cmp -s "$work/new_$inst.o.sass" "$work/old_$inst.o.sass"; then
    echo "$inst same ($(wc -l < "$work/new_$inst.o.sass") instructions)"
  else
    echo "$inst DIFFERS"; rc=1
  fi
done
exit $rc
