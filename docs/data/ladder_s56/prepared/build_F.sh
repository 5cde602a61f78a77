#!/usr/bin/env bash
# Builds .gpuF for callF.sh: the tree's kda_bench as `off` and `on` (run with --narrow off / on), ifif (the six-CTA
# bf16 decode kernel with the conv as two tests, rung_ifif.diff; INC: a copy of include/ with it), and the tree's
# kda_cuda_tests and kda_tests.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/binF && mkdir -p /tmp/binF/bin
ninja -C build/gpu kda_bench kda_cuda_tests kda_tests >/dev/null
INST="step_split1_bf16_q1_nofb_occ6" INCLUDE="${INC:?}" benchmarks/ladder/build_variants.sh /tmp/binF/bin ifif=""
cp build/gpu/benchmarks/kda_bench /tmp/binF/bin/kda_bench_off
cp build/gpu/benchmarks/kda_bench /tmp/binF/bin/kda_bench_on
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests /tmp/binF/bin/
mkdir -p .gpuF && tar cf - -C /tmp/binF bin | xz -T2 -6 > .gpuF/binF.tar.xz
grep -q '^.gpuF/' .git/info/exclude 2>/dev/null || echo '.gpuF/' >> .git/info/exclude
