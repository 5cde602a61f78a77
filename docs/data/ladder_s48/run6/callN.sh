#!/usr/bin/env bash
# Call N (session 48): the final tables (fp32 decode Split 2 from 156 items): the plan tests, the CUDA test of auto at
# the tables' edges, and H = 24, B = 8 (192 items) in gate mode 2 beside vLLM's figure; fp32 decode at 144 / 156.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"
mkdir -p /tmp/b && tar xJf .gpu13/bin13.tar.xz -C /tmp/b
/tmp/b/bin/kda_tests --gtest_filter='Plan.*' 2>&1 | tail -1
timeout 60 /tmp/b/bin/kda_cuda_tests --gtest_filter='CudaVsCpu.AutoVariantAtTheTablesEdges' 2>&1 | tee $OUT/cuda_tests.log | grep -E "OK \]|FAILED|PASSED|configurations"
BIN=/tmp/b/bin OUT=$OUT STAGES="ladder" LADDER="kda_bench --H 24 --B 8 --mode decode --variant auto,wide --gate 2 --state f32 --layout sd --peer docs/data/vllm_k3_decode_h200.csv; kda_bench --H 12 --B 12,13 --mode decode --variant auto --gate 2 --state f32 --layout sd" scripts/gpu_run.sh 2>&1 | tail -3
