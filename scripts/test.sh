#!/usr/bin/env bash
# The test command (README): installs what it needs, builds the library (with the CUDA
# backend when nvcc is found) and, with it, the benchmarks (kda_bench and the ladder's CUDA
# programs, so that they keep compiling), runs the C++ suites (ctest) and the Python suite
# (pytest). GPU tests run where a GPU is present and skip cleanly elsewhere.
#
#   scripts/test.sh            # everything
#   KDA_CPU_ONLY=1 scripts/test.sh   # CPU backend only, even where nvcc exists
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}

echo "== dependencies"
$PY -m pip install -q --disable-pip-version-check "numpy>=1.24" "pytest>=7" "nanobind>=2.0" "scikit-build-core>=0.10"

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

echo "== C++ build and tests"
cmake -S . -B build/test "${gen[@]}" -DKDA_BUILD_TESTS=ON -DKDA_BUILD_BENCHMARKS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/test -j "$JOBS"
ctest --test-dir build/test --output-on-failure -j "$JOBS" | tail -n 25
# ctest must have run tests: an empty suite is a failure
n=$(ctest --test-dir build/test -N | sed -n 's/^Total Tests: *//p')
if [[ -z "$n" || "$n" -eq 0 ]]; then echo "no C++ tests were found" >&2; exit 1; fi

echo "== C++ package: install, then find_package(kda_decode) from examples/cpp_consumer"
rm -rf build/test-install build/consumer
cmake --install build/test --prefix build/test-install >/dev/null
cmake -S examples/cpp_consumer -B build/consumer "${gen[@]}" -DCMAKE_PREFIX_PATH="$PWD/build/test-install" >/dev/null
cmake --build build/consumer -j "$JOBS" >/dev/null
build/consumer/kda_consumer

echo "== Python package and tests"
$PY -m pip install -q --disable-pip-version-check --no-build-isolation .
# Run from outside the source tree so the installed package (with its extension) is imported.
cd tests/python
$PY -m pytest -q -p no:cacheprovider . 2>&1 | tail -n 30
rc=${PIPESTATUS[0]}
# pytest exits 5 when it collected nothing: that is a failure here, not a pass
if [[ $rc -ne 0 ]]; then echo "pytest failed (exit $rc)" >&2; exit 1; fi
echo "== all tests passed"
