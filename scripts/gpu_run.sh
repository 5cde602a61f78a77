#!/usr/bin/env bash
# scripts/gpu_run.sh — everything that needs the GPU, in one call (device-time budget):
# build (sm_90a), GPU tests (C++ and Python), compute-sanitizer, benchmarks; a short table
# last. Full logs and CSVs go to $OUT (or ./gpu-out).
#
#   STAGES="build cpu cuda golden pytest sanitizer bench fla" scripts/gpu_run.sh
#
# Stages (default: all but fla):
#   build      CMake + ninja: library, C++ tests, benchmark (sm_90a)
#   cpu        the C++ CPU suite (kda_tests)
#   cuda       the C++ GPU suite (kda_cuda_tests: CUDA vs CPU backend, graphs, flags)
#   pytest     pip-installs the package (CUDA build) and runs tests/python (GPU tests included)
#   golden     python -m kda_decode.golden --device cuda on every tests/golden case
#   sanitizer  compute-sanitizer memcheck/racecheck/synccheck/initcheck on a small GPU filter
#              and on SanitizerMatrix.* (every variant × step kind); SANITIZER_SETS="filter matrix",
#              SANITIZER_TOOLS (default all four)
#   bench      benchmarks/kda_bench decode table (BENCHMARKS.md protocol) + verify rows
#   sweep      the policy sweep (SWEEP_H, SWEEP_B, SWEEP_VH, SWEEP_VB, SWEEP_Q, SWEEP_VARIANTS)
#              and benchmarks/policy_eval.py on it; a line per run with ETA at a terminal
#              (SWEEP_PROGRESS=1 forces it, CI silences it)
#   fla        benchmarks/fla_chain.py side by side (needs the fla wheel in .whl/; FLA_ARGS, e.g.
#              "--mode per_token --q 4 --H 12,32,96 --B 1,8,64,256" for the verify chain)
#   fuzz       differential fuzzer on CUDA (FUZZ_CONFIGS, FUZZ_CHUNKS, FUZZ_SEED0, FUZZ_PARALLEL; FUZZ_REPLAY
#              "S:I …" replays configurations first)
#   regress    named regression tests and CUDA-only validation rows on the GPU
#   ncu        Nsight Compute profile of one step (NCU_ARGS: kda_bench arguments; NCU_KERNEL regex;
#              NCU_SKIP launches skipped (default 8); NCU_EXTRA more ncu options, e.g. "--cache-control none"
#              for a warm launch;
#              NCU_BIN: a kda_bench_* of $BIN), with a per-instruction SASS stall table (ncu-N-sass.csv;
#              benchmarks/ladder/sass_blocks.py reads it: instructions per item, by block)
#   ladder     LADDER="NAME ARGS;NAME ARGS…": each kda_bench variant $BIN/kda_bench_NAME
#              (benchmarks/ladder/build_variants.sh) with its arguments, into ladder_NAME_<i>.csv,
#              then one table of all rungs (benchmarks/ladder/summarize.py); with rows_prepared
#              lines, each target against its bound (benchmarks/ladder/bounds_verdict.py)
# Environment: BIN = a folder of binaries built on the development machine (kda_tests,
# kda_cuda_tests, kda_bench, kda_bench_*), carried with the call: the build stage is then
# skipped and these are run; BENCH_ARGS overrides the decode table arguments; JOBS (default: nproc);
# FUZZ_DEADLINE (s since start) ends the fuzz stage in time;
# PYTEST_K selects Python tests (pytest -k); CUDA_FILTER the C++ GPU tests (a gtest filter);
# GTEST_TIMEOUT (s, default 600) and GTEST_SHARDS (default 1) bound and split each gtest binary's run;
# CUDA_TESTS_VARIANTS="NAME…" also runs $BIN/kda_cuda_tests_NAME under CUDA_VARIANTS_FILTER_NAME
# (else CUDA_VARIANTS_FILTER).
#
# The device machine has no GoogleTest and no network. Before the call, on this machine:
#   mkdir -p .gpu && cp -r /usr/src/googletest .gpu/                      # C++ tests
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform any -d .whl flash-linear-attention==0.5.2 fla-core==0.5.2   # fla stage
# and name them in the device call: carry [".gpu", ".whl"] (both are git-ignored).
set -uo pipefail
export KDA_CUDA_ARCHS="${KDA_CUDA_ARCHS:-90a}"
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
STAGES="${STAGES:-build cpu cuda pytest golden sanitizer bench}"
JOBS="${JOBS:-$(nproc)}"
BUILD=build/gpu
declare -a SUMMARY=()
# binaries: built here (stage build) or carried prebuilt in $BIN
TESTS_BIN="$BUILD/tests/cpp/kda_tests"
CUDA_TESTS_BIN="$BUILD/tests/cpp/kda_cuda_tests"
BENCH_BIN="$BUILD/benchmarks/kda_bench"
if [[ -n ${BIN:-} ]]; then
  TESTS_BIN="$BIN/kda_tests"
  CUDA_TESTS_BIN="$BIN/kda_cuda_tests"
  BENCH_BIN="$BIN/kda_bench"
  STAGES=" ${STAGES} "
  STAGES=${STAGES// build / }
fi
has() { [[ " $STAGES " == *" $1 "* ]]; }
note() { SUMMARY+=("$1"); echo "== $1"; }
t0=$SECONDS

nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"

if has build; then
  gt=()
  [[ -d .gpu/googletest ]] && gt=(-DKDA_GTEST_SOURCE_DIR="$PWD/.gpu/googletest")
  if cmake -S . -B "$BUILD" -G Ninja -DKDA_BUILD_TESTS=ON -DKDA_BUILD_BENCHMARKS=ON -DKDA_CUDA_ARCHS=90a "${gt[@]}" \
       >"$OUT/cmake.log" 2>&1 && ninja -C "$BUILD" -k 0 -j"$JOBS" kda_tests kda_cuda_tests kda_bench >"$OUT/build.log" 2>&1; then
    note "build: ok ($((SECONDS - t0)) s)"
  else
    tail -40 "$OUT/cmake.log" "$OUT/build.log"
    note "build: FAILED"
  fi
fi

run_gtest() {  # name binary filter
  local name=$1 bin=$2 filter=${3:-*}
  if [[ ! -x $bin ]]; then note "$name: not built"; return; fi
  local t=$SECONDS rc=0 k
  # GTEST_SHARDS=N: N processes of gtest's sharding side by side on the one GPU (the CPU
  # backend's references and the launches' round trips overlap); one log, shard by shard.
  # Line-buffered, so a run cut by GTEST_TIMEOUT keeps what it printed.
  local shards=${GTEST_SHARDS:-1} pids=()
  for ((k = 0; k < shards; ++k)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$k timeout "${GTEST_TIMEOUT:-600}" stdbuf -oL -eL "$bin" \
      --gtest_filter="$filter" --gtest_brief=1 >"$OUT/$name.$k.log" 2>&1 &
    pids+=($!)
  done
  for ((k = 0; k < shards; ++k)); do
    wait "${pids[k]}" || rc=$?
    cat "$OUT/$name.$k.log" >>"$OUT/$name.log"
    rm -f "$OUT/$name.$k.log"
  done
  local line
  line=$(grep -E "^\[  (PASSED|FAILED)|tests ran" "$OUT/$name.log" | tr '\n' ' ')
  [[ $rc -ne 0 ]] && grep -E "Failure|FAILED|error|Expected|Which is|differs" "$OUT/$name.log" | head -40
  note "$name: rc=$rc $line($((SECONDS - t)) s)"
}

has cpu && run_gtest cpu-tests "$TESTS_BIN"
has cuda && run_gtest cuda-tests "$CUDA_TESTS_BIN" "${CUDA_FILTER:-*}"
# CUDA_TESTS_VARIANTS="NAME…": $BIN/kda_cuda_tests_NAME too (GPU test binaries with other plan
# knobs or a planted bug: TARGET=kda_cuda_tests benchmarks/ladder/build_variants.sh), under
# CUDA_VARIANTS_FILTER_NAME, else CUDA_VARIANTS_FILTER (default: CUDA_FILTER)
if has cuda; then
  for v in ${CUDA_TESTS_VARIANTS:-}; do
    vf="CUDA_VARIANTS_FILTER_$v"  # a filter of its own for this binary, if set
    run_gtest "cuda-tests-$v" "$(dirname "$CUDA_TESTS_BIN")/kda_cuda_tests_$v" "${!vf:-${CUDA_VARIANTS_FILTER:-${CUDA_FILTER:-*}}}"
  done
fi

if has pytest || has golden || has fuzz || has regress; then
  t=$SECONDS
  # WHEEL: a wheel built on the development machine (KDA_CUDA_ARCHS=90a python3.12 -m pip
  # wheel --no-deps -w .whl .), carried with the call: installed instead of building here
  if [[ -n ${WHEEL:-} ]]; then
    if python3 -m pip install -q --no-deps --no-compile --force-reinstall --target /tmp/kda-site $WHEEL >"$OUT/pip.log" 2>&1; then
      export PYTHONPATH=/tmp/kda-site${PYTHONPATH:+:$PYTHONPATH}
      note "pip install (carried wheel): ok ($((SECONDS - t)) s)"
    else
      tail -30 "$OUT/pip.log"
      note "pip install (carried wheel): FAILED"
    fi
  elif python3 -m pip install -q --no-build-isolation --no-deps . >"$OUT/pip.log" 2>&1; then
    note "pip install: ok ($((SECONDS - t)) s)"
  else
    tail -30 "$OUT/pip.log"
    note "pip install: FAILED"
  fi
fi

if has golden; then
  pass=0; fail=0
  for d in tests/golden/*/; do
    for layout in ds sd; do
      if python3 -m kda_decode.golden "$d" --device cuda --layout $layout >>"$OUT/golden.log" 2>&1; then
        pass=$((pass + 1)); else fail=$((fail + 1)); echo "golden FAIL: $d $layout"; fi
    done
  done
  grep -E "PASS|FAIL" "$OUT/golden.log" | head -12
  note "golden --device cuda: $pass passed, $fail failed"
fi

if has pytest; then
  t=$SECONDS
  (cd /tmp && timeout "${PYTEST_TIMEOUT:-400}" python3 -m pytest -q -rs "$OLDPWD/tests/python" -p no:cacheprovider ${PYTEST_K:+-k "$PYTEST_K"}) >"$OUT/pytest.log" 2>&1
  rc=$?
  [[ $rc -ne 0 ]] && grep -E "Error|error|assert|FAILED" "$OUT/pytest.log" | head -30
  note "pytest: rc=$rc $(tail -1 "$OUT/pytest.log") ($((SECONDS - t)) s)"
fi

if has bench; then
  bin="$BENCH_BIN"
  ${bin} ${BENCH_ARGS:---H 12,32,96 --B 1,8,64,256 --mode decode --variant auto} --csv "$OUT/bench_decode.csv" | tee "$OUT/bench_decode.txt"
  ${bin} ${BENCH_VERIFY_ARGS:---H 32,96 --B 1,8,64,256 --mode per_token,record,fused --q 4} --csv "$OUT/bench_verify.csv" | tee "$OUT/bench_verify.txt"
  note "bench: see tables above"
fi

if has ladder; then
  # LADDER: ';'-separated runs "NAME ARGS…": binary $BIN/kda_bench_NAME (or $BIN/NAME) with ARGS
  # (line breaks separate runs too: `read` alone would drop every run after the first one)
  t=$SECONDS
  ladder=${LADDER:-c4 --H 96 --B 256 --mode decode --variant wide}
  IFS=';' read -ra runs <<< "${ladder//$'\n'/;}"
  i=0
  for run in "${runs[@]}"; do
    read -r name args <<< "$run"
    [[ -n $name ]] || continue  # an empty run (';;', a trailing line break)
    b="${BIN:-$BUILD/benchmarks}/kda_bench_$name"
    [[ -x $b ]] || b="${BIN:-$BUILD/benchmarks}/$name"
    # shellcheck disable=SC2086
    timeout 300 "$b" $args --csv "$OUT/ladder_${name}_$i.csv" >"$OUT/ladder_${name}_$i.txt" 2>&1 || echo "ladder run $i ($name): rc=$?"
    i=$((i + 1))
  done
  note "ladder: $i runs ($((SECONDS - t)) s)"
fi

if has sweep; then
  # the policy sweep (issue "Performance"): decode over SWEEP_H × SWEEP_B and the verify kinds
  # over SWEEP_VH × SWEEP_VB × SWEEP_Q, each for SWEEP_VARIANTS; then policy_eval.py scores
  # include/kda/heuristics.h against it (copy the CSVs to docs/data/ to keep them).
  # One kda_bench run per H (decode, then verify), appended to one CSV per kind; at a terminal
  # (or SWEEP_PROGRESS=1; never with CI set) a line per run with elapsed time and ETA, the ETA
  # weighing each run by H × its points.
  t=$SECONDS
  bin="$BENCH_BIN"
  V=${SWEEP_VARIANTS:-wide,ws}
  SB=${SWEEP_B:-1,2,4,8,16,32,64,128,256,512}; VB=${SWEEP_VB:-1,8,64,256}; SQ=${SWEEP_Q:-1,2,8}
  IFS=, read -ra sh <<< "${SWEEP_H:-3,6,12,24,32,48,96}"
  IFS=, read -ra svh <<< "${SWEEP_VH:-12,96}"
  IFS=, read -ra nsb <<< "$SB"; IFS=, read -ra nvb <<< "$VB"; IFS=, read -ra nsq <<< "$SQ"
  sweep_progress=${SWEEP_PROGRESS:-}
  if [[ -z $sweep_progress ]]; then
    sweep_progress=0
    [[ -t 1 && -z ${CI:-} ]] && sweep_progress=1
  fi
  [[ -n ${CI:-} ]] && sweep_progress=0
  runs=(); weights=(); total_w=0
  for h in "${sh[@]}"; do runs+=("decode $h"); w=$((h * ${#nsb[@]})); weights+=("$w"); total_w=$((total_w + w)); done
  for h in "${svh[@]}"; do runs+=("verify $h"); w=$((h * ${#nvb[@]} * ${#nsq[@]} * 3)); weights+=("$w"); total_w=$((total_w + w)); done
  : >"$OUT/sweep_decode.txt"; : >"$OUT/sweep_verify.txt"; rm -f "$OUT/sweep_decode.csv" "$OUT/sweep_verify.csv"
  done_w=0
  for i in "${!runs[@]}"; do
    read -r kind h <<< "${runs[$i]}"
    ts=$SECONDS
    if [[ $kind == decode ]]; then
      args=(--H "$h" --B "$SB" --mode decode)
    else
      args=(--H "$h" --B "$VB" --mode per_token,record,fused --q "$SQ")
    fi
    "$bin" "${args[@]}" --variant "$V" --csv "$OUT/sweep_part.csv" >>"$OUT/sweep_$kind.txt" 2>&1
    if [[ -f $OUT/sweep_part.csv ]]; then
      if [[ -f $OUT/sweep_$kind.csv ]]; then tail -n +2 "$OUT/sweep_part.csv" >>"$OUT/sweep_$kind.csv"
      else cp "$OUT/sweep_part.csv" "$OUT/sweep_$kind.csv"; fi
      rm -f "$OUT/sweep_part.csv"
    fi
    done_w=$((done_w + weights[i]))
    if [[ $sweep_progress == 1 ]]; then
      el=$((SECONDS - t)); eta=$(( done_w > 0 ? el * (total_w - done_w) / done_w : 0 ))
      echo "[sweep $((i + 1))/${#runs[@]}] $kind H=$h: $((SECONDS - ts)) s (elapsed $el s, ETA $eta s)"
    fi
  done
  python3 benchmarks/policy_eval.py "$OUT/sweep_decode.csv" "$OUT/sweep_verify.csv" >"$OUT/policy_eval.txt" 2>&1
  note "sweep: $(tail -1 "$OUT/policy_eval.txt") ($((SECONDS - t)) s)"
fi

if has sanitizer; then
  # SANITIZER_SETS: "filter" (CUDA-vs-CPU tests, SANITIZER_FILTER) and/or "matrix"
  # (SanitizerMatrix.*: every variant × step kind on small shapes); default both
  bin="$CUDA_TESTS_BIN"
  filt=${SANITIZER_FILTER:-'CudaVsCpu.SixteenTokensAndSmallShapes:CudaVsCpu.CommitAndFusedBitwise:CudaVsCpu.ErrorFlagsOnDevice:CudaVsCpu.FusedEqualsFlushThenFusedZero'}
  sets=" ${SANITIZER_SETS:-filter matrix} "
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}; do
    if [[ $sets == *" filter "* && ! -x $bin ]]; then
      note "sanitizer $tool: SKIPPED ($bin is missing)"
    elif [[ $sets == *" filter "* ]]; then
      t=$SECONDS
      compute-sanitizer --tool $tool --error-exitcode 9 "$bin" --gtest_filter="$filt" --gtest_brief=1 >"$OUT/sanitizer-$tool.log" 2>&1
      rc=$?
      note "sanitizer $tool: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1) ($((SECONDS - t)) s)"
    fi
    if [[ $sets == *" matrix "* && ! -x $TESTS_BIN ]]; then
      note "sanitizer matrix $tool: SKIPPED ($TESTS_BIN is missing: the matrix runs in kda_tests)"
    elif [[ $sets == *" matrix "* ]]; then
      t=$SECONDS
      compute-sanitizer --tool $tool --error-exitcode 9 "$TESTS_BIN" --gtest_filter='SanitizerMatrix.*' \
        --gtest_brief=1 >"$OUT/sanitizer-matrix-$tool.log" 2>&1
      rc=$?
      [[ $rc -ne 0 ]] && grep -E "Failure|FAILED|Invalid|Race|ERROR" "$OUT/sanitizer-matrix-$tool.log" | head -12
      note "sanitizer matrix $tool: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-matrix-$tool.log" | tail -1) $(grep -o '\[sanitizer-matrix\] [0-9]* cases on the [A-Z]*' "$OUT/sanitizer-matrix-$tool.log" | head -1) ($((SECONDS - t)) s)"
    fi
  done
fi

if has fla; then
  # fla is a benchmark-only dependency, carried as wheels in .whl/ (no network on the device)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fla-site .whl/*.whl >"$OUT/fla-pip.log" 2>&1
  PYTHONPATH=/tmp/fla-site python3 benchmarks/fla_chain.py ${FLA_ARGS:-} --out "$OUT/fla.csv" 2>&1 | tee "$OUT/fla.txt"
  note "fla chain: see table above"
fi

if has ncu; then
  # one profiled launch per configuration (caches flushed by ncu = cold), clocks not locked
  IFS=';' read -ra cfgs <<< "${NCU_ARGS:---H 96 --B 256 --mode decode --variant wide}"
  i=0
  for cfg in "${cfgs[@]}"; do
    t=$SECONDS
    nb=$BENCH_BIN
    [[ -n ${NCU_BIN:-} ]] && nb=${BIN:-$BUILD/benchmarks}/$NCU_BIN
    ncu --clock-control none ${NCU_EXTRA:-} --kernel-name "regex:${NCU_KERNEL:-kda_}" --launch-skip ${NCU_SKIP:-8} --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
      --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section SourceCounters \
      -o "$OUT/ncu-$i" "$nb" $cfg >"$OUT/ncu-$i.log" 2>&1
    ncu --import "$OUT/ncu-$i.ncu-rep" --print-details all >"$OUT/ncu-$i.txt" 2>&1
    # per-instruction stall samples (SASS), for reading on the development machine
    ncu --import "$OUT/ncu-$i.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu-$i-sass.csv" 2>&1
    grep -E "DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Registers Per|Stall|L2 Hit|Mem Busy|Max Bandwidth|Issued Warp|No Eligible" "$OUT/ncu-$i.txt" | head -30
    note "ncu [$cfg]: $OUT/ncu-$i.txt ($((SECONDS - t)) s)"
    i=$((i + 1))
  done
fi

# ---- reliability stages (docs/VALIDATION.md) -------------------------------------------------
#   fuzz      tests/python/fuzz.py on CUDA: FUZZ_CONFIGS (10000) configurations in FUZZ_CHUNKS (4)
#             chunks with distinct seeds, 1 in 25 also against float64; one summary line
#   regress   the named regression tests (test_regressions.py) and the CUDA-only validation rows
#             (test_validation_table.py) on the GPU, with the [drift] lines of the long runs
if has fuzz; then
  t=$SECONDS
  FUZZ_CONFIGS=${FUZZ_CONFIGS:-10000}; FUZZ_CHUNKS=${FUZZ_CHUNKS:-4}; FUZZ_DEVICE=${FUZZ_DEVICE:-cuda}
  FUZZ_SEED0=${FUZZ_SEED0:-20261201}  # chunk c uses seed FUZZ_SEED0 + c (another call: another FUZZ_SEED0)
  per=$(( (FUZZ_CONFIGS + FUZZ_CHUNKS - 1) / FUZZ_CHUNKS ))
  # FUZZ_DEADLINE (seconds since the script started): a chunk stops in time for it
  # FUZZ_PARALLEL=1: the chunks run side by side (one process each; the CPU backend's reference is
  # most of a configuration's time, and the device machine has the cores), each with the whole budget
  fuzz_seconds() {
    local s=${FUZZ_CHUNK_SECONDS:-$((${FUZZ_PARALLEL:-0} == 1 ? 560 : 560 / FUZZ_CHUNKS))}
    if [[ -n ${FUZZ_DEADLINE:-} ]]; then
      local left=$((FUZZ_DEADLINE - (SECONDS - t0) - 10))
      (( left < s )) && s=$left
      (( s < 5 )) && s=5
    fi
    echo "$s"
  }
  # FUZZ_REPLAY="S:I …": configurations replayed first (a mismatch of an earlier call, fixed since)
  for rp in ${FUZZ_REPLAY:-}; do
    if python3 tests/python/fuzz.py --device "$FUZZ_DEVICE" --replay "$rp" >"$OUT/fuzz-replay-${rp/:/-}.log" 2>&1; then
      note "fuzz replay $rp: ok"
    else
      tail -5 "$OUT/fuzz-replay-${rp/:/-}.log"
      note "fuzz replay $rp: FAILED"
    fi
  done
  for ((c = 0; c < FUZZ_CHUNKS; c++)); do
    python3 tests/python/fuzz.py --device "$FUZZ_DEVICE" --configs "$per" --seed $((FUZZ_SEED0 + c)) \
      --sample-f64 $((per / 25)) --max-seconds "$(fuzz_seconds)" >"$OUT/fuzz-$c.log" 2>&1 &
    [[ ${FUZZ_PARALLEL:-0} == 1 ]] || wait $!
  done
  wait
  for ((c = 0; c < FUZZ_CHUNKS; c++)); do
    grep -E "^MISMATCH|^  replay:" "$OUT/fuzz-$c.log" | head -8
    tail -1 "$OUT/fuzz-$c.log"
  done
  nosum=$(grep -LE '^fuzz: [0-9]+ configs' "$OUT"/fuzz-*.log | wc -l)
  note "fuzz $FUZZ_DEVICE: $(grep -hE '^fuzz: [0-9]+ configs' "$OUT"/fuzz-*.log | awk '{n += $2; m += $4} END {printf "%d configs, %d mismatches", n, m}') in $FUZZ_CHUNKS chunks$([[ $nosum -gt 0 ]] && echo ", $nosum chunk(s) without a summary: see $OUT/fuzz-*.log") ($((SECONDS - t)) s)"
fi

if has regress; then
  t=$SECONDS
  (cd /tmp && python3 -m pytest -q -s -p no:cacheprovider -k cuda \
     "$OLDPWD/tests/python/test_regressions.py" "$OLDPWD/tests/python/test_validation_table.py") >"$OUT/regress.log" 2>&1
  rc=$?
  grep -oE "\[drift\].*" "$OUT/regress.log"
  [[ $rc -ne 0 ]] && grep -E "FAILED|Error|assert" "$OUT/regress.log" | head -30
  note "regressions + validation rows (cuda): rc=$rc $(tail -1 "$OUT/regress.log") ($((SECONDS - t)) s)"
fi


echo
echo "================ summary ($((SECONDS - t0)) s) ================"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
[[ -f $OUT/bench_decode.txt ]] && cat "$OUT/bench_decode.txt"
ls "$OUT"/ladder_*.csv >/dev/null 2>&1 && python3 benchmarks/ladder/summarize.py "$OUT"/ladder_*.csv | tee "$OUT/ladder_summary.txt"
# a bounds run (rows_prepared beside kda_bench): each target against its bound
ls "$OUT"/ladder_rows_prepared_*.txt >/dev/null 2>&1 && python3 benchmarks/ladder/bounds_verdict.py "$OUT" | tee "$OUT/bounds_verdict.txt"
# the device tool returns at most 8 files from $OUT: pack the logs into one archive
if (( $(ls "$OUT" | wc -l) > 8 )); then
  tar czf /tmp/kda-gpu-logs.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/kda-gpu-logs.tgz "$OUT/logs.tgz"
fi
exit 0
