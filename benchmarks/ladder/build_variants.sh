#!/usr/bin/env bash
# benchmarks/ladder/build_variants.sh — kda_bench (or, with TARGET=kda_cuda_tests, the GPU
# test; TARGET=kda_tests, the CPU suite with the sanitizer matrix) binaries that differ only in
# the planner's compile-time knobs (include/kda/heuristics.h:
# KDA_STEP_CTAS_PER_SM, KDA_STEP_STAGE_BYTES, KDA_STEP_STAGE_BYTES_MORE, KDA_STEP_MORE_STAGES_MIN_CTAS,
# KDA_STEP_BF16_Q1_CTAS_PER_SM, KDA_STEP_SPREAD_CTAS_PER_SM, KDA_STEP_WIDE_VERIFY_CTAS_PER_SM; and,
# with INST below, the kernel's KDA_STEP_WAVE_TOKENS and KDA_STEP_SMALL_GRID_WAVE_TOKENS of
# include/kda/cuda/step_kernel.cuh and KDA_STEP_CHUNKS_PER_PASS of include/kda/cuda/config.h, which
# the backend's record of the launched kernel, plan/counters.h, does not see),
# for the rungs of the Split/Wide ladder. Only
# src/plan/plan.cpp reads the knobs: it is compiled again per variant and linked ahead of the
# library built in BUILD (default build/gpu; another checkout's build gives that kernel's rung).
#
#   [TARGET="kda_bench kda_cuda_tests"] [INST="…"] [INCLUDE=DIR | PATCH=DIFF] [PLAN=FILE] [JOBS=2] [NO_NINJA=1] benchmarks/ladder/build_variants.sh OUTDIR NAME="-DKNOB=V ..." [NAME=...]
#   e.g. benchmarks/ladder/build_variants.sh .gpu/bin c4="" c3="-DKDA_STEP_CTAS_PER_SM=3"
# NOTES: the script first brings BUILD's targets up to date (ninja). A rung or a planted bug
# edited into a header is therefore compiled into BUILD's library too; restoring the header
# with its old mtime then leaves that library stale. Put such edits behind a definition
# passed in NAME's DEFS, or rebuild BUILD after restoring the header, or edit a copy of
# include/ and name it in INCLUDE: the INST objects are then compiled against that copy and
# BUILD never sees the edit (with -lineinfo a header's line layout alone can change the
# SASS of every kernel, so a rung kept out of the tree leaves the library's objects as they are).
# PATCH=DIFF (a diff of include/, `patch -p1` from the checkout's root) does that copy here: include/ is copied to a
# temporary folder, patched, and used as INCLUDE. INCLUDE applies to the planner's object too, and PLAN names another
# copy of src/plan/plan.cpp to compile (a rung whose host side changes with it).
# NO_NINJA=1 skips that first step and links against BUILD as it is, e.g. a library built before the headers changed
# (a full rebuild takes about 15 minutes on two cores): the planner and the INST objects are compiled from the current
# sources, every other kernel is BUILD's; so only where those other kernels' code is the tree's.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build/gpu}
out=$(realpath -m "$1")
shift
mkdir -p "$out"
if [[ -n ${PATCH:-} ]]; then
  patched=$(mktemp -d)
  trap 'rm -rf "$patched"' EXIT
  cp -r include "$patched/include"
  (cd "$patched" && patch -s -p1) < "$PATCH" || { echo "PATCH: $PATCH does not apply to include/" >&2; exit 2; }
  INCLUDE=$patched/include
fi
TARGETS=${TARGET:-kda_bench}  # one or more: "kda_bench kda_cuda_tests" compiles the rungs once for both
link_args() {  # the target's main object and extra link inputs
  case $1 in
    kda_bench) echo "$BUILD/benchmarks/CMakeFiles/kda_bench.dir/kda_bench.cpp.o" ;;
    kda_cuda_tests)
      # (the test's device helpers and numerics test, compiled by nvcc, are linked as they are)
      echo "$BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir/test_cuda.cpp.o"
      find "$BUILD/tests/cpp/CMakeFiles/kda_cuda_tests.dir" -name '*.cu.o' | sort
      find "$BUILD" /usr/lib -name 'libgtest_main.a' 2>/dev/null | head -1
      find "$BUILD" /usr/lib -name 'libgtest.a' 2>/dev/null | head -1 ;;
    kda_tests)
      # (the CPU suite and the sanitizer matrix: every test object, the matrix's first)
      echo "$BUILD/tests/cpp/CMakeFiles/kda_tests.dir/test_sanitizer_matrix.cpp.o"
      find "$BUILD/tests/cpp/CMakeFiles/kda_tests.dir" -name '*.o' ! -name 'test_sanitizer_matrix.cpp.o' | sort
      find "$BUILD" /usr/lib -name 'libgmock.a' 2>/dev/null | head -1
      find "$BUILD" /usr/lib -name 'libgtest_main.a' 2>/dev/null | head -1
      find "$BUILD" /usr/lib -name 'libgtest.a' 2>/dev/null | head -1 ;;
    *) echo "TARGET: kda_bench, kda_cuda_tests and / or kda_tests" >&2; return 2 ;;
  esac
}
for t in $TARGETS; do link_args "$t" >/dev/null || exit 2; done
# shellcheck disable=SC2086
[[ -n ${NO_NINJA:-} ]] || ninja -C "$BUILD" $TARGETS >/dev/null
cudalib=$(dirname "$(command -v nvcc)")/../targets/x86_64-linux/lib
for spec in "$@"; do
  name=${spec%%=*}
  defs=${spec#*=}
  # shellcheck disable=SC2086
  c++ -DKDA_WITH_CUDA=1 -I"${INCLUDE:-include}" -Isrc -isystem "$(dirname "$(command -v nvcc)")/../include" -O3 -DNDEBUG \
    -ffp-contract=off -std=gnu++20 $defs -c "${PLAN:-src/plan/plan.cpp}" -o "$out/plan_$name.o"
  # INST="step_split1_f32_q1 …": kernel rungs; those instantiations are compiled again with
  # the NAME's definitions and linked ahead of the library's (whose objects are then not pulled)
  insts=()
  for inst in ${INST:-}; do
    cmd=$(ninja -C "$BUILD" -t commands kda_core | grep " -c [^ ]*inst/$inst.cu ")
    [ -n "$cmd" ] || { echo "INST: no instantiation $inst" >&2; exit 2; }
    cmd=$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+$//' <<<"$cmd")
    [ -z "${INCLUDE:-}" ] || cmd=${cmd// -I$PWD\/include / -I$(realpath "$INCLUDE") }
    # shellcheck disable=SC2086
    (cd "$BUILD" && eval "$cmd $defs -o $out/inst_${name}_$inst.o") &
    insts+=("$out/inst_${name}_$inst.o")
    while (($(jobs -rp | wc -l) >= ${JOBS:-2})); do wait -n || exit 1; done
  done
  while (($(jobs -rp | wc -l) > 0)); do wait -n || exit 1; done
  for t in $TARGETS; do
    mapfile -t objs < <(link_args "$t")
    # objects ahead of the library (they may need any of its members), archives after it
    mains=() libs=()
    for o in "${objs[@]}"; do if [[ $o == *.a ]]; then libs+=("$o"); else mains+=("$o"); fi; done
    driver=()  # kda_bench's --sms: the driver API (linked against its stub, loaded from the device's driver)
    [[ $t != kda_bench ]] || driver=(-L"$cudalib/stubs" -lcuda)
    c++ -O3 "${mains[@]}" "${insts[@]}" "$out/plan_$name.o" -o "$out/${t}_$name" \
      -L"$cudalib" "$BUILD/libkda_core.a" "${libs[@]}" "$cudalib/libcudart_static.a" "${driver[@]}" -ldl -lrt -lpthread
    echo "$out/${t}_$name ($defs)"
  done
  rm -f "$out/plan_$name.o" "${insts[@]}"
done
