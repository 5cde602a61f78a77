#!/usr/bin/env bash
# scripts/lint.sh — the lint step of CI (.ci/run): C++/CUDA formatting (clang-format, style in
# .clang-format), Python lint and formatting (ruff) and types (mypy over python/kda_decode;
# configuration in pyproject.toml). Fails on an unformatted file, a lint finding or a type
# error; `scripts/lint.sh --fix` formats the files in place instead.
#
# It checks the files listed below: the host layer, the bindings, the Python package and
# their tests. Files outside the lists keep their hand formatting until the tree is
# formatted in one commit; then the lists become the whole tree.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
fix=0
[[ "${1:-}" == "--fix" ]] && fix=1

echo "== lint tools"
# Pinned: a formatter's output changes between versions.
$PY -m pip install -q --disable-pip-version-check "clang-format==14.0.6" "ruff==0.17.6" "mypy==2.4.1" "numpy>=1.24"
SCRIPTS=$($PY -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
CLANG_FORMAT="$SCRIPTS/clang-format"
[[ -x "$CLANG_FORMAT" ]] || CLANG_FORMAT=clang-format

CXX_FILES=(
  include/kda/errors.h include/kda/operands.h include/kda/helpers.h include/kda/plan.h include/kda/prepared.h
  include/kda/types.h include/kda/params.h include/kda/request.h include/kda/numerics.h include/kda/heuristics.h
  include/kda/cuda/*.cuh include/kda/cuda/config.h
  src/cuda/*.cu src/cuda/*.h src/cuda/*.cuh src/cuda/inst/*.cu src/cpu/*.cpp
  benchmarks/kda_bench.cpp benchmarks/bench_cuda.h benchmarks/ladder/state_move.cu benchmarks/ladder/rows_prepared.cu
  benchmarks/ladder/per_token_move.cu
  src/types.cpp src/helpers.cpp src/backend.h src/cuda_stub.cpp
  src/validate/*.h src/validate/*.cpp src/plan/*.h src/plan/*.cpp src/api/*.h src/api/*.cpp
  csrc/*.h csrc/*.cpp
  examples/cpp_consumer/main.cpp
  tests/cpp/test_host_layer.cpp tests/cpp/test_output_norm.cpp tests/cpp/test_cuda_numerics.cu tests/cpp/cuda_test_kernels.cu tests/cpp/cuda_test_kernels.h
)
PY_FILES=(python/kda_decode tests/python/test_errors.py tests/python/test_output_norm.py)

status=0
echo "== clang-format ($("$CLANG_FORMAT" --version | grep -o 'version [0-9.]*'), ${#CXX_FILES[@]} files)"
if [[ $fix -eq 1 ]]; then
  "$CLANG_FORMAT" -i --style=file "${CXX_FILES[@]}"
else
  "$CLANG_FORMAT" --dry-run --Werror --style=file "${CXX_FILES[@]}" || { echo "unformatted C++ (scripts/lint.sh --fix)"; status=1; }
fi

echo "== ruff"
if [[ $fix -eq 1 ]]; then
  $PY -m ruff format "${PY_FILES[@]}"
  $PY -m ruff check --fix "${PY_FILES[@]}" || status=1
else
  $PY -m ruff format --check "${PY_FILES[@]}" || { echo "unformatted Python (scripts/lint.sh --fix)"; status=1; }
  $PY -m ruff check "${PY_FILES[@]}" || status=1
fi

echo "== mypy"
$PY -m mypy || status=1

if [[ $status -ne 0 ]]; then echo "lint: FAILED" >&2; exit 1; fi
echo "== lint passed"
