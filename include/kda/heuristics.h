// kda/heuristics.h — the thresholds the planner uses (FlashAttention-3 style: one small
// table). Each value names the measurement it comes from.
#pragma once

namespace kda::heuristics {

/// Split: CTAs per item are raised (1, 2, 4, 8) until the grid holds at least this many
/// CTAs per SM. Initial value from the occupancy of the Split kernel (two 128/256-thread
/// CTAs resident per SM); to be replaced by the sweep of benchmarks/sweep.py.
inline constexpr int kSplitTargetCtasPerSm = 2;
/// Largest cluster (portable size on sm_90).
inline constexpr int kMaxSplit = 8;

}  // namespace kda::heuristics
