#!/usr/bin/env bash
# Session 71's call H, carry [".gpuS70", ".gpuS71", ".kdawhl71"] (build_H.sh), in CAP seconds (default 440).
# 1. Rung fd1 (fd with the fp32 q = 1 fold not unrolled) against fd and the tree (`old`): fp32 append Qr = 8, 12, 16
#    on 88 SMs, fp32 fused / record q = 4 at H = 96, bf16 append Qr = 8, 16, bf16 fused q = 3, 4; passes H1, H2, H1,
#    H2 for at most CAP_H seconds (default 180).
# 2. On fd1: the C++ GPU suite in four shards (FILTER, default all), beside the Python suite (whole) and golden with
#    fd1's wheel (PY=0: not run).
set -uo pipefail
CAP=${CAP:-440} CAP_H=${CAP_H:-180} FILTER=${FILTER:-*} PY=${PY:-1}
P=docs/data/ladder_s71/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
B=/tmp/s71h && mkdir -p $B /tmp/o/H /tmp/o/C
tar xJf .gpuS70/binG.tar.xz -C $B && mv $B/bin/commit.txt $B/commitG.txt && tar xJf .gpuS71/binH.tar.xz -C $B
cat $B/commitG.txt $B/bin/commit.txt
ln -f $B/bin/kda_bench_new $B/bin/kda_bench_fd && ln -f $B/bin/kda_bench_new88 $B/bin/kda_bench_fd88
OUT=/tmp/o/H BIN=$B/bin timeout $CAP_H benchmarks/ladder/ladder_passes.sh $P/LADDER_H1.txt $P/LADDER_H2.txt \
  $P/LADDER_H1.txt $P/LADDER_H2.txt > /tmp/o/H/log.txt 2>&1
cp /tmp/o/H/ladder_summary.txt "$OUT/sum_H.txt"; cp /tmp/o/H/ladder.tgz "$OUT/ladder_H.tgz"
echo "ladder H done at ${SECONDS} s"
T=$((CAP - SECONDS - 15)); ((T > 300)) && T=300
for i in 0 1 2 3; do
  GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout $T $B/bin/kda_cuda_tests --gtest_brief=1 --gtest_filter="$FILTER" > /tmp/o/C/suite$i.txt 2>&1 &
done
((PY)) && OUT=/tmp/o/C/py STAGES="pytest golden" WHEEL="$(ls .kdawhl71/*.whl)" PYTEST_TIMEOUT=$((T - 20)) \
  timeout $T scripts/gpu_run.sh > /tmp/o/C/py.txt 2>&1 &
wait
{
  for i in 0 1 2 3; do echo "suite$i: $(grep -E '^\[==========\]|^\[  (PASSED|FAILED|SKIPPED) *\] [0-9]' /tmp/o/C/suite$i.txt | tr '\n' ' ')"; done
  grep -h '^\[  FAILED  \] [A-Z]' /tmp/o/C/suite*.txt | sort -u
  ((PY)) && grep -E '^  (pytest|golden)' /tmp/o/C/py.txt; ((PY)) && grep -E '[0-9]+ passed' /tmp/o/C/py/pytest.log | tail -1
} | tee "$OUT/checks.txt"
tar czf "$OUT/checks.tgz" -C /tmp/o C
cat "$OUT/sum_H.txt"
