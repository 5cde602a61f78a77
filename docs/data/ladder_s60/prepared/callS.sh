#!/usr/bin/env bash
# Call S (session 60; any card): the narrow form's stages (16-row chunks): the tree's four against five (`s5`) and three
# (`s3`), all with --narrow on so that any card runs the narrow form: the narrow-form GPU tests of each, then
# LADDER_S1 / S2 (bf16 decode, two passes, the second reversed) in the seconds CAP leaves (default 300).
# Carry [".gpuS"] (kda_bench_{tree,s5,s3}, kda_cuda_tests_{tree,s5,s3}; build_S.sh). NAMES and LADDERS: other rungs
# and ladder files.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuS/binS.tar.xz -C /tmp/b
D=docs/data/ladder_s60/prepared
for n in ${NAMES:-tree s5 s3}; do
  timeout 100 /tmp/b/bin/kda_cuda_tests_$n --gtest_filter='CudaVsCpu.*Narrow*' --gtest_brief=1 > "$OUT/tests_$n.txt" 2>&1
  echo "tests $n: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_$n.txt" | tr '\n' ' ')"
done
left=$((${CAP:-300} - SECONDS))
((left > 40)) && BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh ${LADDERS:-$D/LADDER_S1.txt $D/LADDER_S2.txt}
cat "$OUT/ladder_summary.txt" 2>/dev/null
