#!/usr/bin/env bash
# Call F (session 60; any card): this tree's narrow form (16-row chunks, three stages) against rung s2 (two stages),
# both with --narrow on so that any card runs the narrow form: the tree's narrow-form and bf16 six-CTA GPU tests and
# s2's narrow-form tests, then LADDER_F1 / F2 (bf16 decode, two passes, the second reversed), then the tree's whole C++
# GPU suite in the seconds CAP leaves (default 330). Carry [".gpuF"] (build_F.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuF/binF.tar.xz -C /tmp/b
D=docs/data/ladder_s60/prepared
timeout 100 /tmp/b/bin/kda_cuda_tests_tree --gtest_filter='CudaVsCpu.*Narrow*:CudaVsCpu.Bf16SixCtasPerSmWide' --gtest_brief=1 > "$OUT/tests_tree.txt" 2>&1
echo "tests tree: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_tree.txt" | tr '\n' ' ')"
timeout 100 /tmp/b/bin/kda_cuda_tests_s2 --gtest_filter='CudaVsCpu.*Narrow*' --gtest_brief=1 > "$OUT/tests_s2.txt" 2>&1
echo "tests s2: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_s2.txt" | tr '\n' ' ')"
left=$((${CAP:-330} - SECONDS))
((left > 40)) && BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh $D/LADDER_F1.txt $D/LADDER_F2.txt
left=$((${CAP:-330} - SECONDS))
((left > 30)) && timeout $left /tmp/b/bin/kda_cuda_tests_tree --gtest_brief=1 > "$OUT/suite_tree.txt" 2>&1
echo "suite tree: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/suite_tree.txt" 2>/dev/null | tr '\n' ' ')"
cat "$OUT/ladder_summary.txt" 2>/dev/null
