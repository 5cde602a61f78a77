#!/usr/bin/env bash
# Builds .gpuG for callG.sh (prepared in session 51 for the next call): the tree's kda_bench and kda_tests (the sanitizer
# matrix with its tenth shape: record and fused at q = 1 in gate mode 0), and kda_tests_bugb built again from
# bug_staged_barrier.diff with that matrix (its record and fused cases must now fail too). About 2 minutes on 2 cores
# once build/gpu is up to date.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_tests kda_bench >/dev/null
rm -rf .gpuG /tmp/binG /tmp/bugB && mkdir -p .gpuG /tmp/binG/bin /tmp/bugB && cp -r include /tmp/bugB/ && (cd /tmp/bugB && patch -p1 < "$OLDPWD/docs/data/ladder_s51/prepared/bug_staged_barrier.diff")
INST="step_split1_f32_q1 step_split1_bf16_q1" INCLUDE=/tmp/bugB/include TARGET=kda_tests \
  benchmarks/ladder/build_variants.sh /tmp/binG/bin bugb=""
cp build/gpu/benchmarks/kda_bench build/gpu/tests/cpp/kda_tests /tmp/binG/bin/
tar cJf .gpuG/binG.tar.xz -C /tmp/binG bin
grep -q '^.gpuG/' .git/info/exclude 2>/dev/null || echo '.gpuG/' >> .git/info/exclude
ls -la .gpuG
