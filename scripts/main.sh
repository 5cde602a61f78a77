#!/usr/bin/env bash
# The main job (README): installs what it needs, builds and installs the package (with the
# CUDA backend when nvcc is found), then runs `python -m kda_decode.main`: realistic layers
# (H = 32, 12, 96; both gates) through a 64-step decode trajectory and each verify scheme,
# on the GPU when one is present (torch with CUDA), else on the CPU backend; the golden
# cases; a short report. Extra arguments go to kda_decode.main (e.g. --device cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check "numpy>=1.24" "nanobind>=2.0" "scikit-build-core>=0.10"
$PY -m pip install -q --disable-pip-version-check --no-build-isolation .
exec $PY -m kda_decode.main --golden "$PWD/tests/golden" "$@"
