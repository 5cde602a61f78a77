#!/usr/bin/env bash
# Session 66's call: carry [".gpuZB", ".whl"] (and ".gpuZC" for an H200's rung, ".kdawhl" for H100_DO=py):
# - an H200: call ZB's H200 part (append bisection LADDER_A, own-bytes bounds LADDER_B, fla's per-token chain),
#   with no C++ checks, in CAP_ZB seconds (default 330); then, in what CAP_H200 (default 420) leaves, rung f16a
#   (build_ZC.sh: Wide fp32 q = 1 in 16-row chunks) and a4 (fp32 append at four CTAs per SM) against the tree, fp32
#   decode (f16a) and append Qr = 8 at H = 48, 96 x B = 64, 128, 256 in gate modes `auto` and 2, two passes in both
#   orders (LADDER_C1 / C2, sum_C.txt);
# - another card, H100_DO=cpp (default): the whole C++ GPU suite (four shards) and the sanitizer matrix under the four
#   tools on the landed tree (.gpuZB's test binaries, built at the tree with rung pol), in TESTS_S seconds;
# - another card, H100_DO=none: nothing (a try for an H200 that costs no more than the start);
# - another card, H100_DO=py: the Python suite, golden on CUDA and the CUDA fuzzer (3000 configurations) from the
#   landed tree's wheel (.kdawhl).
set -uo pipefail
HERE=docs/data/ladder_s64/prepared
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ $GPU == *H200* ]]; then
  H200_ONLY=1 SKIP_CHECKS=1 CAP=${CAP_ZB:-330} bash $HERE/callZB.sh
  left=$((${CAP_H200:-420} - SECONDS))
  if ((left > 30)) && [[ -f .gpuZC/binZC.tar.xz ]]; then
    tar xJf .gpuZC/binZC.tar.xz -C /tmp/zb && mkdir -p /tmp/o/C
    OUT=/tmp/o/C BIN=/tmp/zb/bin timeout $left benchmarks/ladder/ladder_passes.sh \
      docs/data/ladder_s66/prepared/LADDER_C1.txt docs/data/ladder_s66/prepared/LADDER_C2.txt > /tmp/o/C/log.txt 2>&1
    cp /tmp/o/C/ladder_summary.txt "$OUT/sum_C.txt" 2>/dev/null
    tar czf "$OUT/all.tgz" -C /tmp/o . && cat "$OUT/sum_C.txt"
  fi
  exit 0
fi
echo "GPU: $GPU (not an H200: H100_DO=${H100_DO:-cpp})"; echo "$GPU" > "$OUT/gpu.txt"
[[ ${H100_DO:-cpp} == none ]] && exit 0
if [[ ${H100_DO:-cpp} == py ]]; then
  H200_ONLY=1 H100_CHECKS=1 SKIP_CHECKS=1 CAP=${CAP:-450} PYTEST_S=${PYTEST_S:-240} exec bash $HERE/callZB.sh
fi
# CAP below TESTS_S + 30 leaves LADDER_A (run 2 on an H100) out.
H200_ONLY=0 SKIP_CHECKS=0 TESTS_S=${TESTS_S:-300} SAN_S=${TESTS_S:-300} CAP=${TESTS_S:-300} exec bash $HERE/callZB.sh
