#!/usr/bin/env bash
# Call A (session 46): rung s2v's tests, its ladder against the merged tree, ncu of fused q = 4 at two and six requests and one-request decode at H = 48.
set -uo pipefail
mkdir -p /tmp/b && tar xJf .gpu10/bin10.tar.xz -C /tmp/b
for m in 4 3; do
  timeout 150 /tmp/b/bin/kda_cuda_tests_s2v$m --gtest_filter=CudaVsCpu.RungS2vSplit2Q4 --gtest_brief=1 > $OUT/s2v$m-tests.log 2>&1
  echo "s2v$m tests rc=$?: $(grep -E 'PASSED|FAILED|rung s2v' $OUT/s2v$m-tests.log | tr '\n' ' ')"
  grep -E "Failure|Expected|Which is" $OUT/s2v$m-tests.log | head -6
done
timeout 200 /tmp/b/bin/kda_cuda_tests_nc2b --gtest_filter='CudaVsCpu.SplitSharedGateEveryClusterSize:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.EveryVariantEveryStepKind' --gtest_brief=1 > $OUT/nc2b-tests.log 2>&1
echo "nc2b tests rc=$?: $(grep -E 'PASSED|FAILED' $OUT/nc2b-tests.log | tr '\n' ' ')"
grep -E "Failure|Expected|Which is" $OUT/nc2b-tests.log | head -6
F="--q 4 --gate auto --state f32 --layout sd --variant auto"
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder ncu" LADDER="$(cat .gpu10/LADDER10.txt)" NCU_BIN=kda_bench_m NCU_KERNEL=kda_step \
  NCU_ARGS="--H 96 --B 2 --mode fused $F;--H 96 --B 6 --mode fused $F;--H 48 --B 1 --mode decode --gate auto --state f32 --layout sd --variant auto" \
  scripts/gpu_run.sh 2>&1 | tail -60
