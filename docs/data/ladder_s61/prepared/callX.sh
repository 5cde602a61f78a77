#!/usr/bin/env bash
# Call X (session 61; any card, H200 figures wanted): session 60's calls F, G and H in one (carry [".gpuX"] from
# build_X.sh). Checks first, side by side on the card (no timing yet): the tree's whole C++ GPU suite in four shards,
# the fp32 q = 1 tests of f16, the narrow-form tests of s2, l1, n8 and n8s4. Then, alone on the card, four ladders of two
# passes each (the second reversed): G (f16 / f16s3 / f16s2 against the tree: fp32 decode, gate 2 and auto, append
# Qr = 8), H (l1 against the tree: bf16 decode and per_token), N8 (the narrow form in 8-row chunks, three and four
# stages: n8, n8s4), F (s2 against the tree), then the tree's decode grid against
# vLLM's figures in what CAP (default 570 s) leaves. LADDERS="G H N8 F" (default) picks the
# ladders; LADDERS= runs the checks alone, CHECKS= the ladders alone. Everything lands in $OUT/all.tgz after each phase; summaries as
# sum_*.txt.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
CAP=${CAP:-570}
B=/tmp/b && mkdir -p $B /tmp/o && tar xJf .gpuX/binX.tar.xz -C $B
D=docs/data/ladder_s60/prepared
lf() { [[ -f docs/data/ladder_s61/prepared/LADDER_$1.txt ]] && echo docs/data/ladder_s61/prepared/LADDER_$1.txt || echo $D/LADDER_$1.txt; }
pack() { tar czf "$OUT/all.tgz" -C /tmp/o . ; }
tst() {  # NAME BINARY FILTER SECONDS [shard of 4]
  local env=(); [[ -n ${5:-} ]] && env=(GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$5)
  env "${env[@]}" timeout $4 $B/bin/$2 --gtest_filter="$3" --gtest_brief=1 > /tmp/o/tests_$1.txt 2>&1
  echo "rc $?" >> /tmp/o/tests_$1.txt
}
F16='CudaVsCpu.EveryVariantEveryStepKind:CudaVsCpu.Q1KernelPerGateMode:CudaVsCpu.SharedGateEveryStepKind'
F16+=':CudaVsCpu.AppendThenFlushEqualsDecodePerVariant:CudaVsCpu.AppendQr16LargeGridEqualsDecode'
F16+=':CudaVsCpu.Fp32AppendSixCtasPerSmWide:CudaVsCpu.DecodeThreeStateStagesOnASpreadGrid:CudaVsCpu.FusedFoldsUpToQrPendingRecords'
if [[ -n ${CHECKS-1} ]]; then
  for i in 0 1 2 3; do tst suite$i kda_cuda_tests_tree '*' ${SUITE_S:-240} $i & done
  tst f16 kda_cuda_tests_f16 "$F16" 200 &
  tst s2 kda_cuda_tests_s2 'CudaVsCpu.*Narrow*' 200 &
  tst l1 kda_cuda_tests_l1 'CudaVsCpu.*Narrow*' 200 &
  tst n8 kda_cuda_tests_n8 'CudaVsCpu.*Narrow*' 200 &
  tst n8s4 kda_cuda_tests_n8s4 'CudaVsCpu.*Narrow*' 200 &
  wait
  for f in /tmp/o/tests_*.txt; do
    echo "$(basename $f .txt): $(tail -1 $f) $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' $f | tr '\n' ' ')"
  done | tee "$OUT/tests.txt"
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/tests_*.txt | sort -u | head -20 | tee -a "$OUT/tests.txt"
  pack
fi
echo "checks done at ${SECONDS} s"
for c in ${LADDERS-G H N8 F}; do
  left=$((CAP - SECONDS)); ((left > 40)) || break
  mkdir -p /tmp/o/$c
  OUT=/tmp/o/$c BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh $(lf ${c}1) $(lf ${c}2) > /tmp/o/$c/log.txt 2>&1
  cp /tmp/o/$c/ladder_summary.txt "$OUT/sum_$c.txt" 2>/dev/null; pack
  echo "ladder $c done at ${SECONDS} s"
done
left=$((CAP - SECONDS))
if ((left > 40)) && [[ -n ${LADDERS-G} ]]; then
  mkdir -p /tmp/o/grid
  echo "tree --H 12,24,48,96 --B 1,8,32,64,128,256 --mode decode --variant auto --gate auto --state f32 --layout sd --peer docs/data/vllm_k3_decode_h200.csv" > /tmp/grid.txt
  OUT=/tmp/o/grid BIN=$B/bin timeout $left benchmarks/ladder/ladder_passes.sh /tmp/grid.txt > /tmp/o/grid/log.txt 2>&1
  cp /tmp/o/grid/ladder_summary.txt "$OUT/sum_grid.txt" 2>/dev/null; pack
fi
for c in G H N8 F grid; do echo "== $c"; cat "$OUT/sum_$c.txt" 2>/dev/null; done
