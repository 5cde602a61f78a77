#!/usr/bin/env bash
# Call M (session 53): the rest of the tree's checks that call L's time limits cut short on an H100: the C++ GPU
# suite's tests that run the q = 1 Wide kernels (every variant and kind, with and without the output norm, per gate
# mode, bf16 six CTAs, three stages, the planner's tables' edges, bitwise determinism, graphs, a slow producer, error
# flags), then the sanitizer matrix under racecheck; each writes into $OUT as it goes. Binaries: .gpuL (build_L.sh).
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuL/binL.tar.xz -C /tmp/b bin/kda_cuda_tests bin/kda_tests
F='CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.GraphCaptureAndReplay:CudaVsCpu.AutoVariantAtTheTablesEdges:CudaVsCpu.SharedGateStepsAfterASlowProducer:CudaVsCpu.ErrorFlagsOnDevice:CudaVsCpu.NoOutputNormEveryVariantEveryStepKind:CudaVsCpu.EveryVariantEveryStepKind'
t=$SECONDS
timeout 200 /tmp/b/bin/kda_cuda_tests --gtest_filter="$F" > "$OUT/cuda_tests.txt" 2>&1
echo "kda_cuda_tests rc=$? ($((SECONDS - t)) s)"; grep -E "^\[ +(OK|FAILED|PASSED) " "$OUT/cuda_tests.txt"
t=$SECONDS
timeout 170 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/bin/kda_tests --gtest_filter='SanitizerMatrix.*' > "$OUT/racecheck.txt" 2>&1
echo "racecheck rc=$? ($((SECONDS - t)) s): $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.txt" | tail -1) $(grep -o '\[sanitizer-matrix\] [0-9]* cases' "$OUT/racecheck.txt")"
tail -4 "$OUT/racecheck.txt"
