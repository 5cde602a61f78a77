#!/usr/bin/env bash
# The package as a user gets it: builds the sdist and, from it, a wheel (python -m build),
# installs the wheel into a fresh virtual environment, and runs every golden case through
# the installed package on the CPU backend, both window layouts, from outside the source
# tree. Prints "wheel: N passed, M failed" last; exit code 0 only when all passed.
#
#   scripts/wheel_check.sh                  # the CPU backend alone (KDA_CPU_ONLY=1)
#   WHEEL_CUDA=1 scripts/wheel_check.sh     # a wheel with the CUDA backend (KDA_CUDA_ARCHS
#                                           # or the GPUs here, see CMakeLists.txt)
#
# In CI the wheel is built with KDA_CPU_ONLY=1: CI has no GPU, the golden cases run on the
# CPU either way, and the test build before this one already compiles the CUDA kernels
# (sm_90a); a second CUDA compile for the wheel would double CI's longest step on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/kda-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
t0=$SECONDS

echo "== wheel: sdist and wheel (python -m build)"
$PY -m pip install -q --disable-pip-version-check "build>=1"
if [[ ${WHEEL_CUDA:-0} == 1 ]]; then
  unset KDA_CPU_ONLY
else
  export KDA_CPU_ONLY=1
fi
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} $PY -m build --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || {
  tail -40 "$WORK/build.log"; echo "wheel: building the sdist / wheel failed" >&2; exit 1; }
sdist=$(ls "$WORK"/dist/*.tar.gz)
wheel=$(ls "$WORK"/dist/*.whl)
echo "   $(basename "$sdist"), $(basename "$wheel") ($((SECONDS - t0)) s)"
# the sdist carries what the build and the golden data need
tar -tzf "$sdist" >"$WORK/sdist.txt"
for f in CMakeLists.txt cmake/KdaVersion.cmake cmake/KdaCudaArchs.cmake cmake/kda_build_config.py.in \
         python/kda_decode/_version.py tests/golden/decode_softplus_h4_b3/case.json; do
  grep -q "/$f\$" "$WORK/sdist.txt" || { echo "wheel: the sdist lacks $f" >&2; exit 1; }
done

echo "== wheel: a fresh virtual environment"
$PY -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q --disable-pip-version-check "$wheel"
GOLDEN="$PWD/tests/golden"
cd "$WORK"  # outside the source tree: only the installed package can be imported
"$VPY" -m kda_decode.build_info
"$VPY" - <<'EOF'
import importlib.metadata, kda_decode, kda_decode.build_info as bi
meta = importlib.metadata.version("kda-decode")
assert meta == kda_decode.__version__, (meta, kda_decode.__version__)
info = bi.build_info()
assert info["recorded"] and info["version"] == meta, info
print(f"   kda-decode {meta}: version agrees (package, metadata, build record)")
EOF

echo "== wheel: golden cases through the installed package (CPU)"
pass=0; fail=0
for d in "$GOLDEN"/*/; do
  [[ -f $d/case.json ]] || continue
  for layout in ds sd; do
    if "$VPY" -m kda_decode.golden "$d" --device cpu --layout "$layout" >"$WORK/golden.log" 2>&1; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1)); echo "FAIL $(basename "$d") [$layout]"; tail -5 "$WORK/golden.log"
    fi
  done
done
if (( pass == 0 )); then echo "wheel: no golden case ran" >&2; exit 1; fi
echo "   ($((SECONDS - t0)) s)"
echo "wheel: $pass passed, $fail failed"
(( fail == 0 ))
