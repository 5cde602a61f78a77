#!/usr/bin/env bash
# Call E (session 59; any card): rung n9, the bf16 narrow form compiled for nine CTAs per SM instead of eight (the whole
# tree configured with -DKDA_STEP_NARROW_CTAS_PER_SM=9: 56 registers, 8 bytes of spill, two 8 KiB stages; 36 warps an
# SM against 32), against the tree, both with --narrow on so that any card runs the narrow form: its narrow-form GPU
# tests, then LADDER_E1 / E2 (bf16 decode, two passes, the second reversed) in the seconds CAP leaves (default 300).
# Carry [".gpuE"] (kda_bench_tree, kda_bench_n9, kda_cuda_tests_n9; build_E.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuE/binE.tar.xz -C /tmp/b
D=docs/data/ladder_s59/prepared
timeout 120 /tmp/b/bin/kda_cuda_tests_n9 --gtest_filter='CudaVsCpu.*Narrow*:CudaVsCpu.Bf16SixCtasPerSmWide' --gtest_brief=1 > "$OUT/tests_n9.txt" 2>&1
echo "tests n9: rc $? $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$OUT/tests_n9.txt" | tr '\n' ' ')"
left=$((${CAP:-300} - SECONDS))
((left > 40)) && BIN=/tmp/b/bin timeout $left benchmarks/ladder/ladder_passes.sh $D/LADDER_E1.txt $D/LADDER_E2.txt
cat "$OUT/ladder_summary.txt" 2>/dev/null
