#!/usr/bin/env bash
# Builds .gpuA for callA.sh: the tree (build/gpu: kda_bench as tree and off, kda_cuda_tests), rung nf (build/nf: the
# tree with rung_nf.diff applied (the local branch rung-nf), configured with -DKDA_STEP_NARROW_F32_CTAS_PER_SM=8 in
# CMAKE_CXX_FLAGS and CMAKE_CUDA_FLAGS: cmake -S <that checkout> -B build/nf -G Ninja -DKDA_BUILD_TESTS=ON
# -DKDA_BUILD_BENCHMARKS=ON -DKDA_CUDA_ARCHS=90a -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS=…" "-DCMAKE_CUDA_FLAGS=…"),
# the planted bug pb (INC_PB: a copy of include/ with rung_pb.diff) and vf (INC_VF: a copy of include/ with
# ladder_s56/prepared/rung_vf.diff: the narrow form's v conv before the q / k conv; kda_bench and its GPU tests).
# (The .gpuA left by session 57: tree and off built from main at 5c1df9b, kda_cuda_tests at 63c47ff; nf, and pb's library, from
# the tree with rung_nf.diff at its default, which builds no fp32 narrow form and plans as main does.)
# (Session 58 rebuilt vf on the tree, ebac262; session 57's .gpuA carried session 56's vf, built on 16-row chunks.)
# (The carry holds no wheel: the working tree and .gpuA must stay under 64 MiB.)
set -euo pipefail
cd "$(dirname "$0")/../../../.."
ninja -C build/gpu kda_bench kda_cuda_tests >/dev/null
ninja -C build/nf kda_bench kda_cuda_tests >/dev/null
rm -rf /tmp/binA && mkdir -p /tmp/binA/bin
cp build/gpu/benchmarks/kda_bench /tmp/binA/bin/kda_bench_tree
cp build/gpu/benchmarks/kda_bench /tmp/binA/bin/kda_bench_off
cp build/gpu/tests/cpp/kda_cuda_tests /tmp/binA/bin/kda_cuda_tests
cp build/nf/benchmarks/kda_bench /tmp/binA/bin/kda_bench_nf
cp build/nf/tests/cpp/kda_cuda_tests /tmp/binA/bin/kda_cuda_tests_nf
TARGET="kda_bench kda_cuda_tests" INST="step_split1_bf16_q1_nofb_narrow" INCLUDE="${INC_VF:?}" JOBS=1 \
  benchmarks/ladder/build_variants.sh /tmp/binA/bin vf=""
TARGET="kda_cuda_tests" INST="step_split1_bf16_q1_nofb_narrow" INCLUDE="${INC_PB:?}" JOBS=1 \
  benchmarks/ladder/build_variants.sh /tmp/binA/bin pb=""
rm -rf .gpuA && mkdir -p .gpuA && tar cf - -C /tmp/binA bin | xz -T2 -6 > .gpuA/binA.tar.xz
grep -q '^.gpuA/' .git/info/exclude 2>/dev/null || echo '.gpuA/' >> .git/info/exclude
du -sh .gpuA
