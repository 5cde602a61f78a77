// kda/heuristics.h — the thresholds the planner uses (FlashAttention-3 style: one small
// table). Each value names the measurement it comes from.
#pragma once

#include <cstdint>

#include "kda/cuda/config.h"
#include "kda/types.h"

namespace kda::heuristics {

/// The automatic variant on CUDA: the last rule of the step's table whose `min_items`
/// (B·H) is reached. Measured on one H200 (benchmarks/kda_bench; data in docs/data/, tables in
/// docs/PERFORMANCE.md; `python3 benchmarks/policy_eval.py` scores a table against them).
/// The planner falls back to Wide where WS cannot run (unaligned operands, two ring stages
/// not fitting, append steps).
struct AutoRule {
  int64_t min_items;
  Variant variant;
};
/// decode: Split (the item's rows over a cluster) for the smallest grids, WS where one
/// persistent CTA per SM holds one item (around 96 items), Wide elsewhere.
inline constexpr AutoRule kDecodeRules[] = {
    {0, Variant::kSplit}, {17, Variant::kWide}, {64, Variant::kWS}, {133, Variant::kWide}};
/// append: decode's table without WS (WS has no append path).
inline constexpr AutoRule kAppendRules[] = {{0, Variant::kSplit}, {17, Variant::kWide}};
/// per_token: WS at every measured size (the Split/Wide q > 1 path is slower).
inline constexpr AutoRule kPerTokenRules[] = {{0, Variant::kWS}};
/// record / fused: WS up to a few thousand items, Wide from there.
inline constexpr AutoRule kVerifyRules[] = {{0, Variant::kWS}, {6144, Variant::kWide}};
inline constexpr AutoRule kFusedRules[] = {{0, Variant::kWS}, {6144, Variant::kWide}};

/// Split (forced): CTAs per item are raised (2, 4, 8) until the grid holds at least this
/// many CTAs per SM (two 128-thread CTAs are resident per SM).
inline constexpr int kSplitTargetCtasPerSm = 2;
/// Largest cluster (portable size on sm_90).
inline constexpr int kMaxSplit = 8;

/// Split / Wide: the occupancy the kernel is laid out for. A CTA streams its rows through
/// `stages` shared-memory stages; more CTAs per SM hide more of each item's dependent phases,
/// more stages keep more of one item's state in flight. Measured on the H200
/// (docs/data/ladder_s11_run*): four CTAs per SM beat three at every large-batch point; with
/// four, two fp32 stages (32 KiB of state in flight) beat three in gate mode 0 (3–9%: the
/// smaller shared-memory carve-out leaves L1 to the F_B reads) and tie in gate mode 2. So the
/// state stages take at most kStepStageBytes, except in a grid too small to fill the GPU twice
/// (nothing else on the SM to hide an item's latency behind), which takes every chunk at once.
/// KDA_STEP_CTAS_PER_SM and KDA_STEP_STAGE_BYTES are compile-time knobs for the ladder
/// (benchmarks/ladder/build_variants.sh).
#ifndef KDA_STEP_CTAS_PER_SM
#define KDA_STEP_CTAS_PER_SM 4
#endif
#ifndef KDA_STEP_STAGE_BYTES
#define KDA_STEP_STAGE_BYTES 32768
#endif
inline constexpr int kStepCtasPerSm = KDA_STEP_CTAS_PER_SM;
inline constexpr int64_t kStepStageBytes = KDA_STEP_STAGE_BYTES;
/// Shared memory an SM spends on a CTA besides its dynamic shared memory: the driver's
/// reservation (1 KiB on sm_90) and the kernel's static mbarriers.
inline constexpr int64_t kStepSmemPerCtaOverhead = 1024 + 256;

struct StepLayout {
  int stages = 0;       ///< state stages (0: does not fit)
  int ctas_per_sm = 0;  ///< the CTAs per SM the layout fits
  int64_t smem = 0;     ///< dynamic shared memory per CTA
};
/// The layout of a Split/Wide CTA of a grid of `ctas` CTAs on `sms` SMs: the preferred CTAs
/// per SM first, then fewer, each with as many stages as fit (at least two while the CTA has
/// several chunks).
inline StepLayout step_layout(int q, int split, int state_bytes, int records, int64_t smem_per_sm, int64_t smem_optin,
                              int64_t ctas = 0, int sms = 0) {
  const int chunks = cuda_config::chunks_per_cta(split);
  if (smem_per_sm <= 0) smem_per_sm = smem_optin + 1024;
  const bool small = sms > 0 && ctas <= 2 * int64_t(sms);
  const int64_t stage = int64_t(cuda_config::chunk_rows(split)) * kHeadDim * state_bytes;
  int top = chunks < cuda_config::kStepMaxStages ? chunks : cuda_config::kStepMaxStages;
  if (!small) {
    const int cap = int(kStepStageBytes / stage) < 1 ? 1 : int(kStepStageBytes / stage);
    if (top > cap) top = cap;
  }
  const int order[] = {small ? 2 : kStepCtasPerSm, kStepCtasPerSm, 4, 3, 2, 1};
  for (int cps : order) {
    for (int st = top; st >= 1; --st) {
      if (st < 2 && chunks > 1 && cps > 1) break;
      const cuda_config::StepSmem L{q, split, st, state_bytes, records, 2 + q};
      const int64_t bytes = L.bytes();
      if (bytes + 256 > smem_optin || cps * (bytes + kStepSmemPerCtaOverhead) > smem_per_sm) continue;
      return {st, cps, bytes};
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
    case StepMode::kAppend: return pick(kAppendRules);
    case StepMode::kPerToken: return pick(kPerTokenRules);
    case StepMode::kFused: return pick(kFusedRules);
    default: return pick(kVerifyRules);
  }
}

}  // namespace kda::heuristics
