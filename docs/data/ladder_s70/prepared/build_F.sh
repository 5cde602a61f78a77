#!/bin/bash
# Build of session 70's call F: rung fd (rung_fd.diff, KDA_RUNG_FD=N: the pending records' decays by one warp a record,
# four a lane, instead of a thread per element with the index arithmetic per element; the fold's operands by pointers
# stepped once a record, unrolled by N records: 37.5 / 36.25 SASS instructions a record and chunk at N = 2 / 4 against
# the tree's 39) on the fp32 q = 1 six- and five-CTA kernels (append Qr <= 11 and 12-16; fused q = 1), beside the tree
# compiled the same way, as kda_bench_* and kda_cuda_tests_*; the tree's kda_bench (kda_bench_tree) and rows_prepared
# for the H200's targets grid; and kda_cuda_tests_pl1 / _pl2 with the planted bugs of plant_s70.diff in the same two
# kernels (1: a request flagged PENDING resets its row's pending count; 2: a pending count of Qr + 1 runs), which
# CudaVsCpu.ErrorFlagsOnDeviceRecordingKinds must catch. include/ is patched in a copy (build_variants.sh PATCH), so build/gpu is untouched.
# Output: .gpuS70/binF.tar.xz.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
git diff --quiet HEAD -- include src || { echo "build_F: include/ or src/ differ from HEAD" >&2; exit 2; }
W=$(mktemp -d); mkdir -p $W/bin .gpuS70
TARGET="kda_bench kda_cuda_tests" NO_NINJA=1 PATCH=docs/data/ladder_s70/prepared/rung_fd.diff \
  INST="step_split1_f32_q1_nofb_occ6 step_split1_f32_q1_nofb_occ5" \
  benchmarks/ladder/build_variants.sh $W/bin tree="" fd2="-DKDA_RUNG_FD=2" fd4="-DKDA_RUNG_FD=4"
TARGET=kda_cuda_tests NO_NINJA=1 PATCH=docs/data/ladder_s70/prepared/plant_s70.diff \
  INST="step_split1_f32_q1_nofb_occ6 step_split1_f32_q1_nofb_occ5" \
  benchmarks/ladder/build_variants.sh $W/bin pl1="-DKDA_PLANT=1" pl2="-DKDA_PLANT=2"
cp build/gpu/benchmarks/rows_prepared $W/bin/
for n in tree fd2 fd4; do ln $W/bin/kda_bench_$n $W/bin/kda_bench_${n}88; done
{ git rev-parse --short HEAD; echo "+ rung fd (rung_fd.diff); planted bugs (plant_s70.diff)"; } > $W/bin/commit.txt
tar cf - -C $W bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuS70/binF.tar.xz
rm -rf $W
ls -la .gpuS70
