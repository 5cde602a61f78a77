// kda/heuristics.h — the thresholds the planner uses (FlashAttention-3 style: one small
// table). Each value names the measurement it comes from.
#pragma once

#include <cstdint>

#include "kda/types.h"

namespace kda::heuristics {

/// The automatic variant on CUDA: the last rule of the step's table whose `min_items`
/// (B·H) is reached. The values are measured: sweeps of benchmarks/kda_bench on an H200
/// (data in docs/data/, tables and their history in docs/PERFORMANCE.md "Policy";
/// `python3 benchmarks/policy_eval.py` scores a table against the committed sweeps, and
/// tests/python/test_policy_data.py holds these tables to them). In decode WS wins where
/// each persistent CTA owns one item (48–132) and from 384 items; Wide wins below (WS's
/// prologue) and in between (Wide overlaps two CTAs per SM where WS runs two items in a
/// row). The planner falls back to Wide where WS cannot run (unaligned operands, two ring
/// stages not fitting): src/plan/plan.cpp, kVariantSpecs.
struct AutoRule {
  int64_t min_items;
  Variant variant;
};
inline constexpr AutoRule kDecodeRules[] = {
    {0, Variant::kWide}, {48, Variant::kWS}, {133, Variant::kWide}, {384, Variant::kWS}};
inline constexpr AutoRule kVerifyRules[] = {{0, Variant::kWide}, {24, Variant::kWS}};  // per_token, record
inline constexpr AutoRule kFusedRules[] = {{0, Variant::kWide}, {24, Variant::kWS}};

/// Split (forced): CTAs per item are raised (2, 4, 8) until the grid holds at least this
/// many CTAs per SM (two 128-thread CTAs are resident per SM).
inline constexpr int kSplitTargetCtasPerSm = 2;
/// Largest cluster (portable size on sm_90).
inline constexpr int kMaxSplit = 8;
/// Stream runs two CTAs per SM only while its shared memory fits twice (bytes per CTA).
inline constexpr int64_t kStreamTwoPerSmBytes = 113 * 1024;

/// The automatic variant for `items` = B·H items of a `mode` step.
inline Variant auto_variant(int64_t items, StepMode mode = StepMode::kDecode) {
  auto pick = [items](const auto& rules) {
    Variant v = rules[0].variant;
    for (const AutoRule& r : rules)
      if (items >= r.min_items) v = r.variant;
    return v;
  };
  switch (mode) {
    case StepMode::kDecode: return pick(kDecodeRules);
    case StepMode::kFused: return pick(kFusedRules);
    default: return pick(kVerifyRules);
  }
}

}  // namespace kda::heuristics
