#!/usr/bin/env bash
# Call I (session 52): rungs cw2 (the q = 1 Wide kernels' conv taps before the PDL wait: the L2 round trip that run 1's
# ncu shows at the conv, ~8% of the stall samples), wf (the first stages' copies after thread 0's window loads: run 1's
# timeline has the first wave's rows start 10-11 µs after the release, its window loads queued behind ~17 MB of state
# copies), wf1 (wf in the grid's first wave only) and wfc (cw2 and wf) against the tree, two passes in both orders (LADDER_CW1.txt, LADDER_CW2.txt): fp32 decode gate
# mode 2 at 96 and 768–24,576 items, bf16 `auto` at 6144 and 24,576, and (wf, wf1 only) fp32 `auto` at 384 items (gate
# mode 0) and append Qr = 8 at 6144 and 24,576; then the GPU suite's q = 1 tests and the timeline of the tree and of wfc at four points.
# Binaries: .gpuI, built by build_I.sh. About 8 minutes.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && tar xJf .gpuI/binI.tar.xz -C /tmp/b
D=docs/data/ladder_s52/prepared
n=$(wc -l < $D/LADDER_CW1.txt)
mkdir -p /tmp/all
for pass in 1 2; do
  BIN=/tmp/b/bin OUT=/tmp/o$pass STAGES=ladder LADDER="$(paste -sd';' $D/LADDER_CW$pass.txt)" scripts/gpu_run.sh 2>&1 | tail -1
  mkdir -p /tmp/t$pass && tar xzf /tmp/o$pass/logs.tgz -C /tmp/t$pass
  # one folder: pass 2's runs numbered after pass 1's; kept under $OUT after each pass
  for f in /tmp/t$pass/ladder_*.csv; do b=$(basename "$f" .csv); i=${b##*_}; cp "$f" "/tmp/all/${b%_*}_$((i + (pass - 1) * n)).csv"; done
  tar czf "$OUT/ladder.tgz" -C /tmp/all .
  python3 benchmarks/ladder/summarize.py /tmp/all/ladder_*.csv > "$OUT/ladder_summary.txt" 2>&1
done
# the GPU suite's q = 1 tests with both rungs in every Wide q = 1 kernel (every gate mode, bf16 six CTAs, fp32 append
# six CTAs, three stages, append = decode, bitwise determinism, graphs)
timeout 120 /tmp/b/bin/kda_cuda_tests_wfc --gtest_brief=1 --gtest_filter='CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.Bf16SixCtasPerSmWide:CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.BitwiseDeterministicPerVariant:CudaVsCpu.GraphCaptureAndReplay' > "$OUT/tests_wfc.txt" 2>&1; echo "kda_cuda_tests_wfc rc=$?"; tail -5 "$OUT/tests_wfc.txt"
export PYTHONDONTWRITEBYTECODE=1
mkdir -p /tmp/tl
while read -r tag args; do
  for bin in kda_bench_tl kda_bench_wfctl; do
    /tmp/b/bin/$bin $args --variant auto --layout sd --dump-out /tmp/tl/${bin#kda_bench_}_$tag > /dev/null 2>&1
  done
done <<'PTS'
g2 --H 12 --B 128 --mode decode --gate 2 --state f32
g2 --H 96 --B 32 --mode decode --gate 2 --state f32
g2 --H 96 --B 64 --mode decode --gate 2 --state bf16
PTS
for f in /tmp/tl/*.bin; do python3 benchmarks/ladder/timeline.py "$f"; done > "$OUT/timeline.txt" 2>&1
grep -E "^/tmp|period|drain \(|resident at release|launched later" "$OUT/timeline.txt"
echo "--- ladder"; tail -45 "$OUT/ladder_summary.txt"
