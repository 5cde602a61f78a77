// kda/heuristics.h — the thresholds the planner uses (FlashAttention-3 style: one small
// table). Each value names the measurement it comes from.
#pragma once

#include <cstdint>

#include "kda/cuda/config.h"
#include "kda/types.h"

namespace kda::heuristics {

/// The automatic variant on CUDA: the last rule of the step's table whose `min_items`
/// (B·H) is reached. Sweeps on one H200 (benchmarks/kda_bench; data in docs/data/; tables
/// in docs/PERFORMANCE.md; `python3 benchmarks/policy_eval.py` scores a table against them):
///   2026-11-30, run 4 (sweep_*_run4.csv): among Split, Wide and Stream, Wide was fastest or
///     within 1% at all 29 points; Split 4–85% slower, Stream 0.2% faster…40% slower.
///   2026-11-30, session 9 (sweep_s9_*.csv: decode H ∈ {3, 12, 32, 96} × B ∈ {1 … 512},
///     q = 4 per_token / record / fused, H ∈ {32, 96} × B ∈ {1 … 256}), WS (batched request
///     resolution, per-warp stage release) against Wide —
///     decode: Wide up to 32 items (WS 5–14% slower: its prologue), WS at 48–128 items (one
///       item per persistent CTA: 8–12% faster), Wide at 192–256 (WS runs two items in a
///       row on some CTAs while Wide overlaps them: WS 5–7% slower), WS from 384 (10–28%
///       faster, 28% at B = 512);
///     per_token / record / fused: WS from 32 items (the smallest measured) except record and
///       fused at 256 items (Wide 3% faster).
///   2026-11-30, session 10 (sweep_s10_*.csv: decode H ∈ {6, 24, 48} × B ∈ {1 … 512}; verify
///     q ∈ {1, 2, 8} at H ∈ {12, 96}, q = 4 at H ∈ {3, 48}): the tables above hold at every
///     new point but one — q = 4 verify at 24 items (H = 3, B = 8): WS 7% (per_token) and 11%
///     (fused) faster, record equal, so per_token / record / fused take WS from 24 items. Known
///     miss: fused steps with q = 1 at 768–3072 items run 3–9% slower under WS than Wide (the
///     tables are keyed by items only). Over all committed sweeps: the pick is within 5% of
///     the best at 148 of 150 points, within 9% everywhere (benchmarks/policy_eval.py).
/// The planner falls back to Wide where WS cannot run (unaligned operands, two ring stages
/// not fitting).
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

/// Split / Wide: the occupancy the kernel is laid out for. A CTA streams its rows through
/// `stages` shared-memory stages; more CTAs per SM hide more of each item's dependent
/// phases, more stages keep more of one item's state in flight. KDA_STEP_CTAS_PER_SM and
/// KDA_STEP_MAX_STAGES are compile-time knobs for experiments (benchmarks/ladder).
#ifndef KDA_STEP_CTAS_PER_SM
#define KDA_STEP_CTAS_PER_SM 4
#endif
#ifndef KDA_STEP_MAX_STAGES
#define KDA_STEP_MAX_STAGES 4
#endif
#ifndef KDA_STEP_ITEMS
#define KDA_STEP_ITEMS 1
#endif
inline constexpr int kStepCtasPerSm = KDA_STEP_CTAS_PER_SM;
/// Items of one head per Wide CTA in q = 1 steps (1 or 2).
inline constexpr int kStepItems = KDA_STEP_ITEMS;
inline constexpr int kStepMaxStages = KDA_STEP_MAX_STAGES < cuda_config::kStepMaxStages ? KDA_STEP_MAX_STAGES
                                                                                         : cuda_config::kStepMaxStages;
/// Shared memory an SM spends on a CTA besides its dynamic shared memory: the driver's
/// reservation (1 KiB on sm_90) and the kernel's static mbarriers and plan.
inline constexpr int64_t kStepSmemPerCtaOverhead = 1024 + 256;

struct StepLayout {
  int stages = 0;       ///< state stages (0: does not fit)
  int ctas_per_sm = 0;  ///< the register budget the kernel is built for (3 or 4 CTAs per SM)
  int64_t smem = 0;     ///< dynamic shared memory per CTA
};
/// The layout of a Split/Wide CTA: the preferred CTAs per SM first, then fewer, each with as
/// many stages as fit (at least two while the CTA has several chunks).
/// `ctas` of the grid on `sms` SMs: a grid that does not fill the GPU twice has no other
/// CTAs to hide an item's latency behind, so it takes every chunk in flight at once.
inline StepLayout step_layout(int q, int split, int state_bytes, int records, int64_t smem_per_sm, int64_t smem_optin,
                              int items = 1, int64_t ctas = 0, int sms = 0) {
  const int chunks = cuda_config::chunks_per_cta(split);
  if (smem_per_sm <= 0) smem_per_sm = smem_optin + 1024;
  const int first = sms > 0 && ctas <= 2 * int64_t(sms) ? 2 : kStepCtasPerSm;
  const int order[] = {first, kStepCtasPerSm, 4, 3, 2, 1};
  for (int cps : order) {
    const int top = chunks < kStepMaxStages ? chunks : kStepMaxStages;
    for (int st = top; st >= 1; --st) {
      if (st < 2 && chunks > 1 && cps > 1) break;
      const cuda_config::StepSmem L{q, split, st, state_bytes, records, 2 + q, items};
      const int64_t bytes = L.bytes();
      if (bytes + 256 > smem_optin || cps * (bytes + kStepSmemPerCtaOverhead) > smem_per_sm) continue;
      return {st, cps >= 4 ? 4 : 3, bytes};
    }
  }
  return {};
}

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
