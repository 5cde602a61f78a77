#!/bin/bash
# Build of session 70's call G (about 10 minutes on two cores), from a checkout whose include/, src/, tests/ and
# benchmarks/ are HEAD's:
#   old: the tree's kda_bench (kda_bench_old) and rows_prepared; the planted bugs' kda_cuda_tests_pl1 / _pl2
#        (plant_s70.diff in the fp32 q = 1 six- and five-CTA kernels: 1, a request flagged PENDING resets its row's
#        pending count; 2, a pending count of Qr + 1 runs), which CudaVsCpu.ErrorFlagsOnDeviceRecordingKinds must catch;
#   new: the tree with rung fd (fd_tree.diff: the pending records' decays four a thread, the q = 1 fold by pointers
#        unrolled by four records for fp32 state), applied for the build and taken out after it: kda_bench_new (also
#        kda_bench_tree, the targets ladder's name), kda_cuda_tests, kda_tests, and its wheel in .kdawhl70.
# Output: .gpuS70/binG.tar.xz, .kdawhl70/*.whl. build/gpu is left with fd's objects; the next build rebuilds them.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
P=docs/data/ladder_s70/prepared
git diff --quiet HEAD -- include src tests benchmarks || { echo "build_G: the tree differs from HEAD" >&2; exit 2; }
W=$(mktemp -d); mkdir -p $W/bin .gpuS70
cmake --build build/gpu --target kda_bench rows_prepared kda_cuda_tests -j2
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_old && cp build/gpu/benchmarks/rows_prepared $W/bin/
TARGET=kda_cuda_tests NO_NINJA=1 PATCH=$P/plant_s70.diff INST="step_split1_f32_q1_nofb_occ6 step_split1_f32_q1_nofb_occ5" \
  benchmarks/ladder/build_variants.sh $W/bin pl1="-DKDA_PLANT=1" pl2="-DKDA_PLANT=2"
old=$(git rev-parse --short HEAD)
git apply $P/fd_tree.diff
trap 'git apply -R docs/data/ladder_s70/prepared/fd_tree.diff' EXIT
cmake --build build/gpu --target kda_bench kda_cuda_tests kda_tests -j2
cp build/gpu/benchmarks/kda_bench $W/bin/kda_bench_new
cp build/gpu/tests/cpp/kda_cuda_tests build/gpu/tests/cpp/kda_tests $W/bin/
for n in old new; do ln $W/bin/kda_bench_$n $W/bin/kda_bench_${n}88; done
ln $W/bin/kda_bench_new $W/bin/kda_bench_tree  # (the targets ladder's name)
rm -rf .kdawhl70 && KDA_CUDA_ARCHS=90a python3.12 -m pip wheel -q --no-deps -w .kdawhl70 .
{ echo "new: $old + fd_tree.diff"; echo "old, rows_prepared: $old; pl1, pl2: $old + plant_s70.diff"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS70/binG.tar.xz
rm -rf $W
ls -la .gpuS70 .kdawhl70
