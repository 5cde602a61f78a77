#!/usr/bin/env bash
# Call N (session 60; any card): rung n16, the narrow form in 16-row chunks (four stages; the form session 56 measured
# on an H200, 2.1-3.8% faster than the six there) against the tree's 32-row chunks (two stages), both with --narrow on
# so that any card runs the narrow form: n16's narrow-form GPU tests and the bf16 six-CTA test, then LADDER_N1 / N2
# (bf16 decode and per_token, two passes, the second reversed; `six`: the tree's six-CTA form) in the seconds CAP
# leaves (default 300). Carry [".gpuN"] (kda_bench_tree, kda_bench_n16, kda_cuda_tests_n16; build_N.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuN/binN.tar.xz -C /tmp/b && ln -sf kda_bench_tree /tmp/b/bin/kda_bench_six
D=docs/data/ladder_s60/prepared
timeout 120 /tmp/b/bin/kda_cuda_tests_n16 --gtest_filter='CudaVsCpu.*Narrow*:CudaVsCpu.Bf16SixCtasPerSmWide' --gtest_brief=1 > "$OUT/tests_n16.txt" 2>&1
echo "tests n16: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_n16.txt" | tr '\n' ' ')"
left=$((${CAP:-300} - SECONDS))
((left > 40)) && BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh $D/LADDER_N1.txt $D/LADDER_N2.txt
cat "$OUT/ladder_summary.txt" 2>/dev/null
