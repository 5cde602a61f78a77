#!/usr/bin/env bash
# Call C (session 59; any card): where the q = 1 step kernels spend their issue slots. ncu with SourceCounters (per-SASS
# instructions executed and stall samples, one launch each, caches flushed) of
#   0: fp32 append, Qr = 16, H = 96, B = 256, gate mode 2, pending 12 (launch-skip 48: four launches per step, and skip 32
#      begins a step of pending 8, run 2 of this session)
#   1: fp32 append, Qr = 8, the same grid, pending 4 (skip 48)
#   2: bf16 decode in the narrow form (--narrow on), H = 96, B = 256, gate auto
# Carry [".gpuA"] (kda_bench_tree is the tree's). On an H200 it then runs call A's ladder A1 / A2 in the seconds left.
set -uo pipefail
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "GPU: $GPU"; echo "$GPU" > "$OUT/gpu.txt"
mkdir -p /tmp/b && [[ -x /tmp/b/bin/kda_bench_tree ]] || tar xJf .gpuA/binA.tar.xz -C /tmp/b
C="--H 96 --B 256 --variant auto --layout sd"
run_ncu() {  # I SKIP ARGS...
  local i=$1 skip=$2; shift 2
  timeout 150 ncu --clock-control none --kernel-name regex:kda_step --launch-skip "$skip" --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters -o "$OUT/c/ncu-$i" /tmp/b/bin/kda_bench_tree "$@" > "$OUT/c/ncu-$i.log" 2>&1
  echo "ncu $i rc $?"
  ncu --import "$OUT/c/ncu-$i.ncu-rep" --print-details all > "$OUT/c/ncu-$i.txt" 2>&1
  ncu --import "$OUT/c/ncu-$i.ncu-rep" --page source --csv --print-source sass > "$OUT/c/ncu-$i-sass.csv" 2>&1
  grep -E "^    (Duration|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Executed Ipc A|Mem Pipes Busy|Issue Slots Busy|Shared Memory)" "$OUT/c/ncu-$i.txt" | tr -s ' '
}
mkdir -p "$OUT/c"
run_ncu 0 48 $C --mode append --qr 16 --gate 2 --state f32
run_ncu 1 48 $C --mode append --qr 8 --gate 2 --state f32
run_ncu 2 8 $C --mode decode --gate auto --state bf16 --narrow on
rm -f "$OUT"/c/*.ncu-rep.tmp; tar cJf "$OUT/c.tar.xz" -C "$OUT" c && rm -rf "$OUT/c"
if [[ $GPU == *H200* ]]; then
  D=docs/data/ladder_s57/prepared
  BIN=/tmp/b/bin timeout $((560 - SECONDS)) benchmarks/ladder/ladder_passes.sh $D/LADDER_A1.txt $D/LADDER_A2.txt
  cat "$OUT/ladder_summary.txt"
fi
