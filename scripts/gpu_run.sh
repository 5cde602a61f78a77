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
#   bench      benchmarks/kda_bench decode table (BENCHMARKS.md protocol) + verify rows
#   fla        benchmarks/fla_chain.py side by side (needs the fla wheel in .whl/)
# Environment: BENCH_ARGS overrides the decode table arguments; JOBS (default: nproc).
set -uo pipefail
export KDA_CUDA_ARCHS="${KDA_CUDA_ARCHS:-90a}"
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
STAGES="${STAGES:-build cpu cuda pytest golden sanitizer bench}"
JOBS="${JOBS:-$(nproc)}"
BUILD=build/gpu
declare -a SUMMARY=()
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
  local t=$SECONDS
  "$bin" --gtest_filter="$filter" --gtest_brief=1 >"$OUT/$name.log" 2>&1
  local rc=$?
  local line
  line=$(grep -E "^\[  (PASSED|FAILED)|tests ran" "$OUT/$name.log" | tr '\n' ' ')
  [[ $rc -ne 0 ]] && grep -E "Failure|FAILED|error|Expected|Which is|differs" "$OUT/$name.log" | head -40
  note "$name: rc=$rc $line($((SECONDS - t)) s)"
}

has cpu && run_gtest cpu-tests "$BUILD/tests/cpp/kda_tests"
has cuda && run_gtest cuda-tests "$BUILD/tests/cpp/kda_cuda_tests"

if has pytest || has golden; then
  t=$SECONDS
  if python3 -m pip install -q --no-build-isolation --no-deps . >"$OUT/pip.log" 2>&1; then
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
  (cd /tmp && python3 -m pytest -q "$OLDPWD/tests/python" -p no:cacheprovider) >"$OUT/pytest.log" 2>&1
  rc=$?
  [[ $rc -ne 0 ]] && grep -E "Error|error|assert|FAILED" "$OUT/pytest.log" | head -30
  note "pytest: rc=$rc $(tail -1 "$OUT/pytest.log") ($((SECONDS - t)) s)"
fi

if has bench; then
  bin="$BUILD/benchmarks/kda_bench"
  ${bin} ${BENCH_ARGS:---H 12,32,96 --B 1,8,64,256 --mode decode --variant auto} --csv "$OUT/bench_decode.csv" | tee "$OUT/bench_decode.txt"
  ${bin} ${BENCH_VERIFY_ARGS:---H 32,96 --B 1,8,64,256 --mode per_token,record,fused --q 4} --csv "$OUT/bench_verify.csv" | tee "$OUT/bench_verify.txt"
  note "bench: see tables above"
fi

if has sanitizer; then
  bin="$BUILD/tests/cpp/kda_cuda_tests"
  filt=${SANITIZER_FILTER:-'CudaVsCpu.SixteenTokensAndSmallShapes:CudaVsCpu.CommitAndFusedBitwise:CudaVsCpu.ErrorFlagsOnDevice:CudaVsCpu.FusedEqualsFlushThenFusedZero'}
  for tool in memcheck racecheck synccheck initcheck; do
    t=$SECONDS
    compute-sanitizer --tool $tool --error-exitcode 9 "$bin" --gtest_filter="$filt" --gtest_brief=1 >"$OUT/sanitizer-$tool.log" 2>&1
    rc=$?
    note "sanitizer $tool: rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tail -1) ($((SECONDS - t)) s)"
  done
fi

if has fla; then
  # fla is a benchmark-only dependency, carried as wheels in .whl/ (no network on the device)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fla-site .whl/*.whl >"$OUT/fla-pip.log" 2>&1
  PYTHONPATH=/tmp/fla-site python3 benchmarks/fla_chain.py ${FLA_ARGS:-} --out "$OUT/fla.csv" 2>&1 | tee "$OUT/fla.txt"
  note "fla chain: see table above"
fi

echo
echo "================ summary ($((SECONDS - t0)) s) ================"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
[[ -f $OUT/bench_decode.txt ]] && cat "$OUT/bench_decode.txt"
exit 0
