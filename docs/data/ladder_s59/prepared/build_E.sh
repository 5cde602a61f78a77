#!/usr/bin/env bash
# Builds .gpuE for callE.sh: the tree (build/gpu) and rung n9 (build/n9: the same source configured with
# -DKDA_STEP_NARROW_CTAS_PER_SM=9 in CMAKE_CXX_FLAGS and CMAKE_CUDA_FLAGS, so that the planner, the backend's dispatch
# and the instantiation agree).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
F="-DKDA_STEP_NARROW_CTAS_PER_SM=9"
[[ -f build/n9/build.ninja ]] || cmake -S . -B build/n9 -G Ninja -DKDA_BUILD_TESTS=ON -DKDA_BUILD_BENCHMARKS=ON \
  -DKDA_CUDA_ARCHS=90a -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=$F" "-DCMAKE_CUDA_FLAGS=$F" >/dev/null
ninja -C build/gpu kda_bench >/dev/null
ninja -C build/n9 kda_bench kda_cuda_tests >/dev/null
rm -rf /tmp/binE && mkdir -p /tmp/binE/bin
cp build/gpu/benchmarks/kda_bench /tmp/binE/bin/kda_bench_tree
cp build/n9/benchmarks/kda_bench /tmp/binE/bin/kda_bench_n9
cp build/n9/tests/cpp/kda_cuda_tests /tmp/binE/bin/kda_cuda_tests_n9
rm -rf .gpuE && mkdir -p .gpuE && tar cf - -C /tmp/binE bin | xz -T2 -6 > .gpuE/binE.tar.xz
grep -q '^.gpuE/' .git/info/exclude 2>/dev/null || echo '.gpuE/' >> .git/info/exclude
du -sh .gpuE
