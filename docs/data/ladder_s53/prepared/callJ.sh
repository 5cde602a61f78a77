#!/usr/bin/env bash
# Call J (session 53): session 52's prepared rungs (cw2, wf, wf1, wfc: docs/data/ladder_s52/prepared/build_I.sh) and
# sp (rung_sp.diff: each CTA, once its prologue is done, prefetches into L2 the window columns and input rows of the
# item about one wave ahead, blockIdx + CTAs per SM × SMs) against the tree, two passes in both orders (LADDER_A.txt,
# LADDER_B.txt): fp32 decode gate mode 2 at 768–6144 items, bf16 `auto` at 6144, fp32 `auto` at 384 items (gate mode
# 0) and append Qr = 8 at 6144; then the GPU suite's q = 1 tests on wfc and on sp, and the timeline of the tree, wfc
# and sp at three points. Binaries: .gpuK (.gpuI of session 52's build_I.sh and .gpuJ of build_J.sh in one archive, pack_K.sh). About 7 minutes.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuK/binIJ.tar.xz -C /tmp/b
D=docs/data/ladder_s53/prepared
n=$(wc -l < $D/LADDER_A.txt)
mkdir -p /tmp/all
pass=0
for L in A B; do
  pass=$((pass + 1))
  BIN=/tmp/b/bin OUT=/tmp/o$pass STAGES=ladder LADDER="$(paste -sd';' $D/LADDER_$L.txt)" scripts/gpu_run.sh 2>&1 | tail -1
  mkdir -p /tmp/t$pass && tar xzf /tmp/o$pass/logs.tgz -C /tmp/t$pass
  for f in /tmp/t$pass/ladder_*.csv; do b=$(basename "$f" .csv); i=${b##*_}; cp "$f" "/tmp/all/${b%_*}_$((i + (pass - 1) * n)).csv"; done
  tar czf "$OUT/ladder.tgz" -C /tmp/all .
  python3 benchmarks/ladder/summarize.py /tmp/all/ladder_*.csv > "$OUT/ladder_summary.txt" 2>&1
done
F='CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.GraphCaptureAndReplay'
for t in wfc sp; do
  timeout 100 /tmp/b/bin/kda_cuda_tests_$t --gtest_brief=1 --gtest_filter="$F" > "$OUT/tests_$t.txt" 2>&1; echo "kda_cuda_tests_$t rc=$?"; tail -3 "$OUT/tests_$t.txt"
done
export PYTHONDONTWRITEBYTECODE=1
mkdir -p /tmp/tl
while read -r tag args; do
  for bin in kda_bench_tl kda_bench_wfctl kda_bench_sptl; do
    /tmp/b/bin/$bin $args --variant auto --layout sd --dump-out /tmp/tl/${bin#kda_bench_}_$tag > /dev/null 2>&1
  done
done <<'PTS'
g2 --H 12 --B 128 --mode decode --gate 2 --state f32
g2 --H 96 --B 32 --mode decode --gate 2 --state f32
g2 --H 96 --B 64 --mode decode --gate 2 --state bf16
PTS
for f in /tmp/tl/*.bin; do python3 benchmarks/ladder/timeline.py "$f"; done > "$OUT/timeline.txt" 2>&1
grep -E "^/tmp|period|drain \(|resident at release|launched later" "$OUT/timeline.txt"
echo "--- ladder"; tail -40 "$OUT/ladder_summary.txt"
