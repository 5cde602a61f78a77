#!/usr/bin/env bash
# Session 69's call B, carry [".gpuS69", ".kdawhl"] (build_B.sh). .gpuS69/binB.tar.xz: the tree's C++ test binaries
# (kda_cuda_tests, kda_tests; commit.txt names the commit); .kdawhl: the wheel of the same tree
# (`KDA_CUDA_ARCHS=90a python3.12 -m pip wheel --no-deps -w .kdawhl .`). On any card, the checks owed on the tree since
# h5: the C++ GPU suite in four shards beside the sanitizer matrix under the four tools (TESTS_S each, side by side),
# then the Python suite, golden and the CUDA fuzzer (3000 configurations) with the wheel in what CAP leaves.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s69g && mkdir -p $B /tmp/o/G && tar xJf .gpuS69/binB.tar.xz -C $B && echo "commit $(cat $B/bin/commit.txt)"
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout ${TESTS_S:-300} $B/bin/kda_cuda_tests --gtest_brief=1 \
    > /tmp/o/G/suite$i.txt 2>&1 &
done
for tool in memcheck racecheck synccheck initcheck; do
  timeout ${TESTS_S:-300} compute-sanitizer --tool $tool --error-exitcode 9 $B/bin/kda_tests \
    --gtest_filter='SanitizerMatrix.*' --gtest_brief=1 > /tmp/o/G/san-$tool.log 2>&1 &
done
wait
{
  for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[==========\]|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' /tmp/o/G/suite$i.txt | tr '\n' ' ')"; done
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/G/suite*.txt | sort -u
  for tool in memcheck racecheck synccheck initcheck; do
    echo "matrix $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/o/G/san-$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' /tmp/o/G/san-$tool.log)"
  done
} | tee "$OUT/checks.txt"
echo "checks done at ${SECONDS} s"
left=$((${CAP:-580} - SECONDS))
if ((left > 60)); then
  OUT=/tmp/o/G/py STAGES="pytest golden fuzz" WHEEL="$(ls .kdawhl/*.whl)" PYTEST_TIMEOUT=$((left / 2)) FUZZ_CONFIGS=3000 \
    FUZZ_SEED0=20261690 FUZZ_DEADLINE=$((left - 10)) timeout $left scripts/gpu_run.sh > /tmp/o/G/py.txt 2>&1
  tail -25 /tmp/o/G/py.txt | tee "$OUT/py.txt"
fi
tar czf "$OUT/all.tgz" -C /tmp/o G
