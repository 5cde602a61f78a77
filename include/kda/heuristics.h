// kda/heuristics.h — the thresholds the planner uses (FlashAttention-3 style: one small
// table). Each value names the measurement it comes from.
#pragma once

#include <cstdint>

#include "kda/types.h"

namespace kda::heuristics {

/// The automatic variant on CUDA: the first rule whose `min_items` (B·H) is reached, read
/// from the end. Sweep of 2026-11-30 on one H200 (benchmarks/kda_bench; data in
/// docs/data/sweep_decode_run4.csv and sweep_verify_run4.csv; table in docs/PERFORMANCE.md):
/// Wide was the fastest variant, or within 1% of it, at all 29 points (decode, H ∈ {3, 12,
/// 32, 96} × B ∈ {1, 4, 16, 64, 256}; q = 4 per_token / record / fused, H = 32, B ∈ {1, 8,
/// 64}). Split (cluster cooperation) was 4–85% slower (decode 4–63%) and Stream
/// (persistent prefetch) between 0.2% faster and 40% slower; both stay available by forcing
/// them in a policy.
struct AutoRule {
  int64_t min_items;
  Variant variant;
};
inline constexpr AutoRule kAutoRules[] = {{0, Variant::kWide}};

/// Split (forced): CTAs per item are raised (2, 4, 8) until the grid holds at least this
/// many CTAs per SM (two 128-thread CTAs are resident per SM).
inline constexpr int kSplitTargetCtasPerSm = 2;
/// Largest cluster (portable size on sm_90).
inline constexpr int kMaxSplit = 8;
/// Stream runs two CTAs per SM only while its shared memory fits twice (bytes per CTA).
inline constexpr int64_t kStreamTwoPerSmBytes = 113 * 1024;

/// The automatic variant for `items` = B·H items.
inline Variant auto_variant(int64_t items) {
  Variant v = kAutoRules[0].variant;
  for (const AutoRule& r : kAutoRules)
    if (items >= r.min_items) v = r.variant;
  return v;
}

}  // namespace kda::heuristics
