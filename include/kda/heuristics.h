// kda/heuristics.h — the thresholds the planner uses (FlashAttention-3 style: one small
// table). Each value names the measurement it comes from.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kda/cuda/config.h"
#include "kda/types.h"

namespace kda::heuristics {

/// The automatic variant on CUDA: the last rule of the step's table whose `min_items`
/// (B·H) is reached. Measured on one H200 (benchmarks/kda_bench; data in docs/data/, tables and
/// their history in docs/PERFORMANCE.md; `python3 benchmarks/policy_eval.py` scores a table
/// against them). The planner falls back to Wide where WS cannot run (unaligned operands,
/// two ring stages not fitting, append steps): src/plan/plan.cpp, kVariantSpecs.
struct AutoRule {
  int64_t min_items;
  Variant variant;
};
/// decode (docs/data/sweep_s11_run3_decode.csv, H ∈ {4, 12, 24, 48, 96} × B ∈ {1 … 256}):
/// Split (the item's rows over a cluster) up to 12 items (5–15% faster than Wide there), Wide
/// from there (WS within 2% of it around 96 items and 6–8% faster only at H = 4, B = 32 / 64).
/// The same table held for bf16 state once small grids were spread over the SMs
/// (kStepSpreadCtasPerSm): Wide beat Split at 48–192 items then, by 43-44% at 96 items and 9-10% at
/// 192 (docs/data/ladder_s15/run4; without the spread Split won at 96-383 items with bf16 state,
/// docs/data/ladder_s14/run8, run9). At 48–192 items Split stayed behind Wide with fp32 state
/// too, without the spread padding and with half the split (docs/data/ladder_s21/run3: H = 48,
/// B = 1 in gate mode 0 Wide 6.71 µs, Split 14.19, 9.67 unpadded, 7.28 at split 2).
/// NOTES: Split up to 66 items. With the split that keeps a grid within one CTA per SM (choose_split,
/// kMaxSplit below) Split beats Wide wherever that split is at least 2: up to 66 items on the
/// H200's 132 SMs (clusters of 8 up to 12 items, of 4 at 13–24, of 2 at 25–66). Decode at one
/// request: 16 items 4.51 µs against Wide's 5.52, 48 items 6.18 against 6.33, 64 items 6.44
/// against 6.67; append Qr = 8 at 16 items 6.30 against 7.80 (docs/data/ladder_s34/run4, run5).
/// Before, the split filled two CTAs per SM, and Split ran only up to 12 items and at 17–24
/// (ladder_s28/run3), losing by 45–60% at 13–16 and 25–32 items, where its clusters of 8 took
/// a second wave.
inline constexpr int64_t kSplitMaxItems = 66;
/// NOTES: Split 2 where Wide is unbalanced. From 133 items Wide puts two items on some SMs (side by
/// side: at 134 items it takes 10.7 µs against 8.9 at 132 on an H100), and the more SMs carry two,
/// the closer the step comes to two items' time; Split 2's halves (a spread grid of two or three
/// per SM) carry at most one and a half items' rows per SM up to 198 items, and from 199 a fourth
/// CTA on an SM. Split 2 against Wide, fp32 decode (docs/data/ladder_s48/run5, H200, gate mode 2:
/// +6% at 134 items, −1.5% at 144, −4% at 156, −5.5% at 168, −7 to −8% at 192 and 198, +11% at
/// 200; gate mode 0 +3%, −5%, −4%, −3%, −3.5%, −5%, +9%; on an H100, ladder_s48/run2 and run3,
/// gate mode 2 +10%, +3%, −0.6%, −4%, −5 to −6.5%, −6%, +13%, gate mode 0 +5%, −3%, −1.3%, −1%,
/// −1%, −3.5%, +13%); H200 at 145–155 items (ladder_s49/run1): gate mode 2 −1.7 to −2.7%, under the
/// gate rule −3.5 to −4.5%. Split from 144, the first point the H200 (the project's card) runs
/// ahead in both gate modes (the H100 in gate mode 2 is 3% behind at 144, ahead from 156). fp32
/// append does not gain there (H200, 192 items: +1 to +2%; H100, 144 / 168 / 192: −1.6 / +0.5 / +3%).
inline constexpr int64_t kSplitBalanceMinItems = 144;
inline constexpr int64_t kSplitBalanceMaxItems = 198;
inline constexpr AutoRule kDecodeRules[] = {
    {0, Variant::kSplit}, {67, Variant::kWide}, {144, Variant::kSplit}, {199, Variant::kWide}};
/// decode with bf16 state: Split up to 132 items. Its Split 2 CTA takes its 64 rows as one chunk on
/// kernels compiled for two CTAs per SM (cuda_config::split2_bf16_q1_one_chunk), so up to 132 items
/// it runs in one wave: H200 (ladder_s48/run1, run5, gate mode 0) 3–6% ahead at 72, 96, 120 and 132
/// items (96 items 6.24–6.30 µs against Wide's 6.51–6.53), 1.3–2.2% in gate mode 2 (run5); H100 (run2) 2–5%
/// in gate mode 0, 1–2% in gate mode 2; from 133 a second wave (H100, 134 items: 10.8 against 8.7;
/// H200, 144 items: 10.63–10.78 against 8.45–8.63).
inline constexpr AutoRule kDecodeBf16Rules[] = {{0, Variant::kSplit}, {133, Variant::kWide}};
/// append: decode's first two rules (WS has no append path; Split 2 at 144–192 items does not gain).
inline constexpr AutoRule kAppendRules[] = {{0, Variant::kSplit}, {67, Variant::kWide}};
static_assert(kDecodeRules[1].min_items == kSplitMaxItems + 1 && kAppendRules[1].min_items == kSplitMaxItems + 1,
              "the tables' Split range");
static_assert(kDecodeRules[2].min_items == kSplitBalanceMinItems &&
                  kDecodeRules[3].min_items == kSplitBalanceMaxItems + 1,
              "decode's balancing Split range");
/// verify steps under gate mode 0, by q: with one token the Split/Wide kernel wins every kind
/// at every measured size (per_token 6–8%, record 12–16%, fused 14–24%;
/// docs/data/sweep_s11_run3_verify*.csv). With q ≥ 2 (the token-group kernel with its norms
/// formed once per token, docs/data/ladder_s17/run3, H = 12 and 96, one to 256 requests):
/// per_token runs fastest on WS at every point (Wide takes 7–37% longer); record and fused at
/// q = 2 on WS (Wide within 2% at 3072 items, 1–24% longer elsewhere), at q ≥ 4 on Wide from
/// 576 items (WS takes 7–29% longer at q = 8; at q = 4 13–26% longer from 3072 items, within
/// 5% either way at 576 and 768), on WS below (Wide 1–16% longer at 12–96 items; at 192 record
/// q = 4 and fused q = 4 ran 1.5% and 7% faster on Wide). The kernels of this tree in gate mode 0
/// (docs/data/ladder_s26/run1, q = 2, 4, H = 96, B = 1, 2, 6, 64 and H = 12, B = 16, 32): per_token
/// still on WS (Wide 7–34% longer), record and fused at q = 2 on WS but at 384 items (Wide 5–10%
/// faster there), at q = 4 Wide from 192 items (WS 3–10% longer at 192, 17–21% at 384; at 576
/// record 5.5% faster on WS, fused a tie), so q ≥ 4 takes Wide from 192. q = 16 does not fit
/// WS's ring: Wide. These tables are gate mode 0's: without the F_B path in the step (gate modes
/// 1 and 2) they run Wide where they say WS (auto_variant_without_fb).
/// Up to 12 items every verify kind runs Split, as decode does: under the planner's gate rule it
/// took 0.9–40% less time than the pick of the tables below at every measured point (H = 12,
/// B = 1 and H = 4, B = 2, 3; q = 1…16; record, fused, per_token: record q = 4 11.90 against
/// 13.73 µs, fused 12.07 against 15.09, per_token 11.55 against 16.62; docs/data/ladder_s20/run5).
/// NOTES: that rule predates Wide's small-grid verify forms, which run record and fused at q = 2, 3
/// faster than Split there wherever the step has no F_B path (kVerifyQ2RulesWithoutFb below); in
/// gate mode 0 Split keeps them (H = 12, B = 1, record q = 2: Split 9.03 µs, Wide 9.53, whose F_B
/// path spills at q >= 2), and per_token and q = 1, 8, 16 keep Split in every mode
/// (docs/data/ladder_s48/run1: per_token q = 4 9.2 against Wide's 12.7, record q = 8 12.2 against 13.3).
inline constexpr AutoRule kPerTokenQ1Rules[] = {{0, Variant::kSplit}, {13, Variant::kWide}};
inline constexpr AutoRule kPerTokenRules[] = {{0, Variant::kSplit}, {13, Variant::kWS}};
inline constexpr AutoRule kVerifyQ1Rules[] = {{0, Variant::kSplit}, {13, Variant::kWide}};  // record, fused at q = 1
inline constexpr AutoRule kVerifyQ2Rules[] = {{0, Variant::kSplit}, {13, Variant::kWS}};    // record, fused at q = 2, 3
inline constexpr AutoRule kVerifyQ4Rules[] = {
    {0, Variant::kSplit}, {13, Variant::kWS}, {192, Variant::kWide}};  // q >= 4
/// record and fused at q = 2, 3 without the F_B path in the step (gate modes 1 and 2; the planner's
/// gate rule takes mode 1 for them at every size): Wide everywhere, up to 12 items too.
/// NOTES: Wide's small-grid verify form (two CTAs per SM, the q tokens' chunks per pass) takes one
/// item's prologue chain at one request faster than Split's cluster, whose ranks each run the q
/// tokens' conv and norms and exchange Σo². Under the planner's gate rule (mode 1), H = 4, 8, 12 at
/// one request and H = 4 at two and three, on the H200 (docs/data/ladder_s48/run1): record q = 2 Wide
/// 6.0–6.5 µs against Split's 7.0–7.8 (Split 1.15–1.23 ×), fused q = 2 7.4–7.8 against 8.3–8.7
/// (1.10–1.13 ×), record q = 3 1.02–1.05 ×, fused q = 3 1.03 ×; on an H100 the same way
/// (docs/data/ladder_s47/run4, H = 12, B = 1: record q = 2 6.5 against 7.8, fused 7.9 against 8.6).
/// At q = 4 record leans to Wide (Split 1.01–1.06 ×: kRecordQ4RulesWithoutFb below) and fused is a
/// tie (0.99–1.02 ×), and from q = 8 Split wins (record q = 8 0.91–0.93 ×, q = 16 0.90–0.94 ×), so
/// kVerifyQ4Rules stays for them.
inline constexpr AutoRule kVerifyQ2RulesWithoutFb[] = {{0, Variant::kWide}};  // record, fused at q = 2, 3
/// record at q = 4 without the F_B path: Wide up to 12 items too (above, kVerifyQ4Rules' WS and
/// Wide run Wide without it). Under the gate rule on the H200 (docs/data/ladder_s49/run1): H = 4, 8,
/// 12 at one request Wide 7.85 / 8.31 / 8.50 µs against Split's 8.05 / 8.39 / 8.85 (Split 1.01–1.04 ×);
/// gate mode 2 at H = 12 7.73 against 8.08; H = 4 at three requests Split 1.06 × (ladder_s48/run1).
/// Fused at q = 4 keeps Split (Wide 0.99–1.02 ×: H = 4, 8 1.3% and 2.4% behind), and so do q = 5–7,
/// where Wide's run-time-q kernel takes 1.2–1.3 × Split's time (record q = 5 at H = 12: 13.56
/// against 10.79 µs).
inline constexpr AutoRule kRecordQ4RulesWithoutFb[] = {{0, Variant::kWide}};

/// Split: the CTAs per item (2, 4, 8) are the most that keep the grid within one CTA per SM, and
/// clusters of 4 and 8 within kSplitClusterMaxCtas CTAs (choose_split).
/// NOTES: one CTA per SM. The split used to be raised until the grid held two CTAs per SM; a
/// Split item's CTA is short (16–64 rows) and its time is the item's dependent prologue, which a
/// second CTA on the SM slows more than the rows it takes off. Decode at one request, gate mode 0
/// (docs/data/ladder_s34/run3, run4, run5): H = 16 Split 4 (64 CTAs) 4.51 µs against Wide 5.52; H = 20
/// 4.63 against Split 8 4.92; H = 24 Split 4 4.73–4.84 against Split 8 (192 CTAs, two per SM)
/// 5.04–5.06; H = 48 Split 2 6.13–6.18 against Wide 6.33; H = 64 6.44 against 6.67; H = 12 Split 8
/// 4.49 (Split 4 4.44); bf16 state and append Qr = 8 the same way (H = 16 append 6.30 against 7.80).
/// Clusters must fit in one GPC: 32 clusters of 4 (128 CTAs: H = 32, B = 1) took 8.92 µs against
/// Wide's 5.84, a second wave, as 16 clusters of 8 did (ladder_s28/run3); 24 of 4 and 12 of 8
/// (96 CTAs) ran in one. KDA_MAX_SPLIT: the ladder's knob.
#ifndef KDA_MAX_SPLIT
#define KDA_MAX_SPLIT 8
#endif
inline constexpr int kMaxSplit = KDA_MAX_SPLIT;
/// KDA_SPLIT_CTAS_PER_SM, KDA_SPLIT_CLUSTER_MAX_CTAS: the ladder's knobs (the CTAs per SM a
/// split may take, the cluster bound above). Up to three per SM and 400 CTAs lost again with the
/// norm exchange by st.async (decode at one request, gate mode 0: H = 16 7.79 µs against 4.21,
/// H = 48 9.43 against 5.85; docs/data/ladder_s39/run3, rungs na3 and sp3), and without the spread
/// padding too (KDA_STEP_SPREAD_CTAS_PER_SM=0: H = 16 5.20 against 4.22, H = 48 6.44 against 5.91;
/// ladder_s39/run8, s8n).
#ifndef KDA_SPLIT_CTAS_PER_SM
#define KDA_SPLIT_CTAS_PER_SM 1
#endif
#ifndef KDA_SPLIT_CLUSTER_MAX_CTAS
#define KDA_SPLIT_CLUSTER_MAX_CTAS 96
#endif
inline constexpr int kSplitCtasPerSm = KDA_SPLIT_CTAS_PER_SM;
inline constexpr int64_t kSplitClusterMaxCtas = KDA_SPLIT_CLUSTER_MAX_CTAS;
/// A spread Split grid is padded so that exactly ⌈ctas / sms⌉ CTAs fit on an SM. Room for one
/// more (a cluster that finds no GPC with enough free SMs could then take a second CTA on an SM
/// instead of waiting for a wave) lost at every point (decode at one request, gate mode 0; with
/// clusters of 4 and 8 up to 128 CTAs): H = 32 Split 4 5.46 µs against the rule's Split 2 5.26,
/// and the same splits as the rule lose too, H = 24 5.06 against 4.54 (PDL lets the next step's
/// CTAs onto the SM beside this one's, inferred). Two CTAs per SM with clusters up to 192 CTAs
/// (KDA_SPLIT_CTAS_PER_SM=2, KDA_SPLIT_CLUSTER_MAX_CTAS=192): H = 48 Split 4 5.83 against 5.86, a
/// tie; H = 24 Split 8 4.82 against 4.54 (docs/data/ladder_s40/run1).

/// Split / Wide: the occupancy the kernel is laid out for. A CTA streams its rows through
/// `stages` shared-memory stages; more CTAs per SM hide more of each item's dependent phases,
/// more stages keep more of one item's state in flight. Measured on the H200
/// (docs/data/ladder_s11_run*): four CTAs per SM beat three at every large-batch point; with
/// four, two fp32 stages (32 KiB of state in flight) beat three in gate mode 0 (3–9%: the
/// smaller shared-memory carve-out leaves L1 to the F_B reads). So a large grid's CTA keeps at
/// most step_stage_bytes() of state in flight, and a grid too small to fill the GPU twice
/// (nothing else on the SM to hide an item's latency behind) takes every chunk at once.
/// KDA_STEP_CTAS_PER_SM, KDA_STEP_STAGE_BYTES, KDA_STEP_STAGE_BYTES_MORE (and
/// KDA_STEP_MORE_STAGES_MIN_CTAS below) are compile-time knobs for the ladder
/// (benchmarks/ladder/build_variants.sh).
#ifndef KDA_STEP_CTAS_PER_SM
#define KDA_STEP_CTAS_PER_SM 4
#endif
#ifndef KDA_STEP_STAGE_BYTES
#define KDA_STEP_STAGE_BYTES 32768
#endif
#ifndef KDA_STEP_STAGE_BYTES_MORE
#define KDA_STEP_STAGE_BYTES_MORE 49152
#endif
inline constexpr int kStepCtasPerSm = KDA_STEP_CTAS_PER_SM;
/// q = 1 Wide steps with bf16 state in gate modes 1 and 2 (no F_B path; token vectors read
/// from shared memory per chunk) are cut to 40 registers for six CTAs per SM. An item moves
/// half the bytes of an fp32 one for the same dependent prologue, so more items in flight pay:
/// H = 96, B = 256 decode mode 1 617.9 µs with six against 731.0 with four (mode 2: 592.1
/// against 741.2), 697.3 with five; append Qr = 8 632.6 against 689.1. fp32 decode is fastest
/// with four at every measured point (mode 1 at H = 96, B = 256: 876.5 against 902.0 with
/// five, 950.5 with six), and also where six take the grid in fewer waves (gate mode 2, 768 /
/// 1536 / 3072 items, one / two / four waves against two / three / six: +4.0 / +6.2 / +7.6% on this
/// kernel, +0.6 / +2.7 / +3.7% without its evict-first state loads; docs/data/ladder_s38/run1), so a
/// tail wave is not what those grids pay for; fp32 append runs six too
/// (kStepF32AppendCtasPerSm below).
/// KDA_STEP_BF16_Q1_CTAS_PER_SM: the ladder's knob.
#ifndef KDA_STEP_BF16_Q1_CTAS_PER_SM
#define KDA_STEP_BF16_Q1_CTAS_PER_SM 6
#endif
inline constexpr int kStepBf16Q1CtasPerSm = KDA_STEP_BF16_Q1_CTAS_PER_SM;
/// Whether a bf16 decode or per_token step (q = 1, Wide, gate modes 1 and 2) of `ctas` CTAs runs the narrow form
/// (cuda_config::narrow_form: 128 threads an item, cuda_config::kNarrowCtasPerSm CTAs per SM) rather than six CTAs of
/// 256 per SM: where the grid is more than one wave of six per SM and the device's peak DRAM bandwidth is at least
/// kNarrowMinDramGbpsPerSm per SM (a policy may ask for either form: Policy::narrow).
/// NOTES: the narrow form. The six-CTA kernel is bound by each item's dependent chain (request, first wave, conv, gate,
/// norms, then the rows; 0.54 instructions issued per scheduler, ladder_s49), and its 40 registers leave no room for
/// more CTAs of 256 threads; a CTA of 128 threads takes the same chain with half the threads, so more items are in
/// flight per SM. What pays depends on how many bytes per SM must be in flight to keep the DRAM busy (its bandwidth per
/// SM times its latency). H200 (4.8 TB/s, 36 GB/s per SM), bf16 decode, gate mode 2 / `auto`, the narrow form in 16-row
/// chunks (four rows a warp, four stages): 1536 items 1.0 / 2.3% and 3072–24,576 items 2.1–3.8% faster with eight CTAs
/// of 128 per SM than with six of 256 (H = 96, B = 256 467.94 against 480.27 µs in mode 2, 476.17 against 487.18 in
/// `auto`; B = 64 120.76 / 122.95 against 124.06 / 126.34); ten per SM (48 registers) 0–0.7% behind eight, twelve (40
/// registers, 40 bytes of spills) 1.9–3.5% behind the six; at 768 items, one wave of six per SM, the six win by 2.5–7%
/// (the narrow CTA's longer chain shows where no second wave follows; docs/data/ladder_s56/run3). Its chunks: 16 rows
/// (cuda_config::kNarrowChunkRows). The six's 32-row chunks (eight rows a warp, two stages: half the refills), up to
/// 4.3% faster than 16-row ones on an H100 (ladder_s56/run8), were 2.5–2.8% slower on the H200 from 3072 items (H = 96,
/// B = 256 `auto` 489.47 against 475.66 µs, gate mode 2 481.69 against 468.12; 1536 items a tie) and only tied the six
/// there (docs/data/ladder_s60/run2, run3). H100 (3.35 TB/s, 25 GB/s per SM): 16-row chunks 1.7–5.0% slower than the
/// six at 1536 items and 0.1–1.1% from 3072 (ladder_s56/run4–run6), 32-row ones −1.1…+0.1% (run 9): the rule keeps
/// the six there.
/// KDA_STEP_NARROW_MIN_GBPS_PER_SM: the ladder's knob.
#ifndef KDA_STEP_NARROW_MIN_GBPS_PER_SM
#define KDA_STEP_NARROW_MIN_GBPS_PER_SM 30
#endif
inline constexpr int64_t kNarrowMinDramGbpsPerSm = KDA_STEP_NARROW_MIN_GBPS_PER_SM;
/// The narrow form's state stages (chunks in flight per CTA): three of its 16-row bf16 chunks, 12 KiB.
/// NOTES: the narrow form's stages. Fewer bytes in flight per CTA ran faster on the H200: three stages 0.8–1.3% faster
/// than four at every point of 1536–24,576 items (H = 96, B = 256 `auto` 470.16 against 475.79 µs; H = 24, B = 256
/// 124.62 against 125.99), five 0–0.5% slower than four (docs/data/ladder_s60/run4). Every CTA's first stages are
/// issued with its window loads; fewer state bytes in the DRAM queue let those loads, on the item's chain, return
/// sooner (the timeline's prologue, docs/PERFORMANCE.md session 52). KDA_STEP_NARROW_STAGES: the ladder's knob.
#ifndef KDA_STEP_NARROW_STAGES
#define KDA_STEP_NARROW_STAGES 3
#endif
inline constexpr int kNarrowStages = KDA_STEP_NARROW_STAGES;
static_assert(kNarrowStages >= 1 && kNarrowStages <= cuda_config::kStepMaxStages, "the narrow form's stages");
/// The planner's stage bytes for the narrow form (step_layout's cap): kNarrowStages of its chunks.
inline constexpr int64_t narrow_stage_bytes(int state_bytes) {
  return int64_t(kNarrowStages) * cuda_config::kNarrowChunkRows * kHeadDim * state_bytes;
}
/// The rule's grid part: more CTAs than one wave of six per SM (where Policy::narrow 'on' takes the form on any
/// device).
inline bool narrow_grid(int64_t ctas, int sms) {
  return cuda_config::kNarrowCtasPerSm > 0 && sms > 0 && ctas > int64_t(kStepBf16Q1CtasPerSm) * sms;
}
inline bool narrow_step(int64_t ctas, int sms, int64_t dram_gbps) {
  return narrow_grid(ctas, sms) && dram_gbps >= kNarrowMinDramGbpsPerSm * sms;
}
/// fp32 append steps in gate modes 1 and 2 run the q = 1 kernel cut for six CTAs per SM too
/// (`StepTraits<1, float, 1, false, 6>`, one fp32 stage); from Qr = 12 six CTAs' staged records
/// do not fit, and they run five on the kernel compiled for five (`StepTraits<1, float, 1, false, 5>`,
/// 48 registers, no spills; step_layout takes the counts below the preferred one in turn).
/// NOTES: an append step reads the state but writes it back only once per Qr steps, and folds
/// its pending records on the way: bound by the item's chain more than by its bytes, like bf16
/// decode, so the items in flight pay more than the second stage. Qr = 8, H = 96, `auto`: B = 8 /
/// 64 / 256 26.62 / 166.85 / 659.46 µs against 31.47 / 171.33 / 671.89 with four (−15.4 / −2.6
/// / −1.9%); H = 48, B = 32 −7.0%, H = 12 / 48, B = 512 −2.3 / −1.7%; one request as
/// fast (a spread grid keeps its layout) (docs/data/ladder_s37/run1). fp32 decode stays at four
/// (kStepBf16Q1CtasPerSm above). Qr = 16 at five, on the six-CTA kernel compiled for five, against
/// four (H100, H = 48, 96 x B = 64, 256): 7.2–8.5% faster on a green context of 88 SMs (the H200's
/// DRAM bandwidth per SM, where append is bound by its SMs), 3.0–4.0% on all 132; Qr = 8 there
/// at five instead of six: 0.2–0.8% slower on 88 SMs, 0.2–0.6% faster on 132, so Qr ≤ 11 keep six
/// (docs/data/ladder_s67/run1, rung a5; session 38's five, on a kernel before the lean vectors,
/// had tied four).
/// KDA_STEP_F32_APPEND_CTAS_PER_SM: the ladder's knob (4: the decode kernel's layout).
#ifndef KDA_STEP_F32_APPEND_CTAS_PER_SM
#define KDA_STEP_F32_APPEND_CTAS_PER_SM 6
#endif
inline constexpr int kStepF32AppendCtasPerSm = KDA_STEP_F32_APPEND_CTAS_PER_SM;
/// Wide verify steps (q ≥ 2) are laid out for up to four CTAs per SM like decode; where the
/// layout puts at most two on an SM (a grid of at most two CTAs per SM, or shared memory for two)
/// they run the kernel compiled for two (cuda_config::small_grid_verify).
/// KDA_STEP_WIDE_VERIFY_CTAS_PER_SM: the ladder's knob (2: every Wide verify grid on that kernel).
#ifndef KDA_STEP_WIDE_VERIFY_CTAS_PER_SM
#define KDA_STEP_WIDE_VERIFY_CTAS_PER_SM KDA_STEP_CTAS_PER_SM
#endif
inline constexpr int kStepWideVerifyCtasPerSm = KDA_STEP_WIDE_VERIFY_CTAS_PER_SM;
/// The CTAs per SM a Wide verify grid of `ctas` CTAs is laid out for (the planner's preference;
/// the layout takes fewer where the shared memory does not fit them): the dense form's five
/// (cuda_config::kDenseVerifyCtasPerSm) for record and fused steps at q = 2, 3, 4 without the F_B
/// path, else kStepWideVerifyCtasPerSm.
/// NOTES: five CTAs per SM for verify. Record and fused steps are bound by each item's dependent
/// chain, not by bytes, so the fifth CTA's items in flight pay more than the 16 registers a thread
/// and the second state stage they cost, and a grid of up to five per SM runs in one wave instead
/// of two. Record: faster at every grid beyond one wave of four, q = 2, 3, 4, fp32 and bf16 state
/// (H = 96, B = 6 / 32 / 256, fp32: q = 2 −12.1 / −5.5 / −6.7%, q = 3 −17.8 / −5.3 / −4.6%, q = 4 at
/// B = 6 / 16 / 32 / 128 / 256 −14.5 / −4.7 / −3.4 / −3.6 / −3.6%; bf16 q = 2 −9.5 / −6.0 / −7.5%,
/// q = 4 −12.8 / −5.9 / −5.3%; q = 4 at H = 12 and 48, 576 to 6144 items, −3.1 to −12.9%; bf16 q = 3 −13.5 / −5.7 / −5.9% at B = 6 / 64 / 256) but
/// for a tie at 768 items (H = 12, B = 64: 31.67 against 31.59 µs; H = 96, B = 8: 32.14 against 31.83). Fused stages its pending records too
/// and pays a grid's last partial wave more: one wave at five where four need two (576 items:
/// −10.5 to −15.4% at every q and dtype), and beyond that only where five take fewer waves than four
/// and q = 4 or bf16 state (fp32 q = 4 at 3072–24,576 items −0.6 to −2.1%, bf16 q = 2 / 4 −3.2 to
/// −5.2%; fp32 q = 2, 3 there +0.8 to +2.3%; fp32 q = 4 at 768 and 1536 items, as many waves either
/// way, +8 to +10% and +5%; at 672 items, two waves either way, five took 1.3% off). per_token stores the state after every token and is bound by its bytes:
/// four (five 0.6–3.2% slower from 672 items). Measured as rungs (the four-CTA kernels compiled for
/// five, the layout's knob at five; docs/data/ladder_s36/run2–run4). KDA_STEP_DENSE_VERIFY: the
/// ladder's knob (0: off).
#ifndef KDA_STEP_DENSE_VERIFY
#define KDA_STEP_DENSE_VERIFY 1
#endif
inline int wide_verify_ctas_per_sm(StepMode mode, int q, bool state_bf16, bool reads_fb, int64_t ctas, int sms) {
  constexpr int base = kStepWideVerifyCtasPerSm, dense = cuda_config::kDenseVerifyCtasPerSm;
  if (!KDA_STEP_DENSE_VERIFY || base >= dense || sms <= 0 || !cuda_config::has_dense_verify_form(1, q, reads_fb) ||
      (mode != StepMode::kRecord && mode != StepMode::kFused) || ctas <= int64_t(base) * sms)
    return base;
  if (mode == StepMode::kRecord || ctas <= int64_t(dense) * sms) return dense;
  const auto waves = [ctas, sms](int per_sm) { return (ctas + int64_t(per_sm) * sms - 1) / (int64_t(per_sm) * sms); };
  return (q == 4 || state_bf16) && waves(dense) < waves(base) ? dense : base;
}
inline constexpr int64_t kStepStageBytes = KDA_STEP_STAGE_BYTES;
inline constexpr int64_t kStepStageBytesMore = KDA_STEP_STAGE_BYTES_MORE;
/// Split/Wide grids of at most kStepSpreadCtasPerSm CTAs per SM are spread: each CTA asks
/// for enough dynamic shared memory that ⌈ctas / sms⌉ of them fit on an SM and no more.
/// NOTES: programmatic dependent launch lets the next step's CTAs in while this one runs.
/// Small CTAs then pile up, up to the occupancy limit, on the SMs that happen to be free, and
/// the step runs with several CTAs on some SMs and none on others. Spread (same kernels, gate
/// mode 0, docs/data/ladder_s15/run2-run4): 96-item grids 19-22% faster with fp32 state
/// (H = 96, B = 1: 11.54 → 9.26 µs) and 38% with bf16 (15.02 → 9.34), 48-128 items 5-17%,
/// 192 items 2-4%, 384 items (three per SM) 7%, four per SM no further gain; Split at up to
/// 12 items 4-8%. Holding 192 items to one per SM instead costs 29% (a second wave).
/// KDA_STEP_SPREAD_CTAS_PER_SM: the ladder's knob (0: off).
#ifndef KDA_STEP_SPREAD_CTAS_PER_SM
#define KDA_STEP_SPREAD_CTAS_PER_SM 3
#endif
inline constexpr int kStepSpreadCtasPerSm = KDA_STEP_SPREAD_CTAS_PER_SM;
/// Shared memory an SM spends on a CTA besides its dynamic shared memory: the driver's
/// reservation (1 KiB on sm_90) and the kernel's static mbarriers.
inline constexpr int64_t kStepSmemPerCtaOverhead = 1024 + 256;
/// ⌈ctas / sms⌉ where the grid is spread (at most kStepSpreadCtasPerSm CTAs per SM), else 0.
inline int64_t spread_ctas_per_sm(int64_t ctas, int sms) {
  const int64_t per_sm = sms > 0 ? (ctas + sms - 1) / sms : 0;
  return per_sm >= 1 && per_sm <= kStepSpreadCtasPerSm ? per_sm : 0;
}

/// The state bytes a Split/Wide CTA of a grid of `ctas` CTAs keeps in flight beyond a grid too
/// small to fill the GPU twice (which takes every chunk): kStepStageBytesMore (three fp32
/// stages) for a decode step on a spread grid, or without the F_B slice (gate modes 1 and 2)
/// from kStepMoreStagesMinCtas CTAs; else kStepStageBytes (two).
/// NOTES: a spread grid (three CTAs per SM at 265–396 CTAs) pads its CTAs to their share of
/// the SM, so a third stage costs it no occupancy and no L1 (the padding sets the carve-out):
/// decode at 384 items in gate mode 2 took 16.97 / 16.94 µs with three (H = 12, B = 32 /
/// H = 48, B = 8; docs/data/ladder_s20/run5) against 17.65–17.74 with two, and in gate mode 0
/// 18.93 / 18.91–18.95 against 19.50 / 19.38–19.47 (H = 24, B = 16 and H = 96, B = 4: −2.3%,
/// −1.8%; docs/data/ladder_s21/run1). Every chunk in flight (four stages) was 2–13% slower
/// (ladder_s20/run3). At four CTAs per SM a third stage gains 0.2–0.9% from 6144 items in gate
/// modes 1 and 2 and loses 2–2.5% at 768 (ladder_s20 runs 2, 4, 5; mode 2 at 768 items 32.7
/// against 33.5–33.9 µs, ladder_s21/run1), and in gate mode 0 it lost 3–9% (its F_B slice
/// wants the L1). Four stages at three CTAs per SM from 768 items lost 3.5–9% (mode 2,
/// ladder_s21/run1), and from 6144 CTAs tied three at four (−0.4…+0.3% on the H200 and the
/// H100, gate modes 1 and 2; docs/data/ladder_s55/run8, run6). Record, fused, per_token and
/// append were within ±0.4% either way (ladder_s20/run4): two.
/// KDA_STEP_MORE_STAGES_MIN_CTAS: the ladder's knob.
#ifndef KDA_STEP_MORE_STAGES_MIN_CTAS
#define KDA_STEP_MORE_STAGES_MIN_CTAS 6144
#endif
inline constexpr int64_t kStepMoreStagesMinCtas = KDA_STEP_MORE_STAGES_MIN_CTAS;
inline int64_t step_stage_bytes(bool decode, bool reads_fb, int64_t ctas, int sms) {
  if (!decode) return kStepStageBytes;
  if (spread_ctas_per_sm(ctas, sms) > 0) return kStepStageBytesMore;
  return !reads_fb && ctas >= kStepMoreStagesMinCtas ? kStepStageBytesMore : kStepStageBytes;
}

struct StepLayout {
  int stages = 0;       ///< state stages (0: does not fit)
  int ctas_per_sm = 0;  ///< the CTAs per SM the layout fits
  int64_t smem = 0;     ///< dynamic shared memory per CTA
};
/// The layout of a Split/Wide CTA of a grid of `ctas` CTAs on `sms` SMs: the preferred CTAs
/// per SM first, then fewer, each with as many stages as fit; a grid of at most kStepSpreadCtasPerSm CTAs per SM is then
/// padded to ⌈ctas / sms⌉ CTAs per SM (the returned ctas_per_sm and smem say so). A grid of
/// more than two CTAs per SM keeps at most `stage_bytes` of state per CTA in flight
/// (step_stage_bytes). `prefer_ctas_per_sm` is also the most the kernel was compiled for (its
/// registers): the layout never asks for more.
inline StepLayout step_layout(int q, int split, int state_bytes, int records, int64_t smem_per_sm, int64_t smem_optin,
                              int64_t ctas = 0, int sms = 0, int prefer_ctas_per_sm = kStepCtasPerSm,
                              int64_t stage_bytes = kStepStageBytes, int threads = cuda_config::kStepThreads) {
  const int chunks = cuda_config::chunks_per_cta(split, q, state_bytes, threads);
  if (smem_per_sm <= 0) smem_per_sm = smem_optin + 1024;
  const bool small = sms > 0 && ctas <= 2 * int64_t(sms);
  const int64_t stage = int64_t(cuda_config::chunk_rows(split, q, state_bytes, threads)) * kHeadDim * state_bytes;
  int top = chunks < cuda_config::kStepMaxStages ? chunks : cuda_config::kStepMaxStages;
  if (!small) {
    const int cap = int(stage_bytes / stage) < 1 ? 1 : int(stage_bytes / stage);
    if (top > cap) top = cap;
  }
  // NOTES: a CTA per SM is worth more than a second stage. With the other CTAs of a full SM
  // complement behind it, one stage keeps the copy engine busy: append Qr = 16 at H = 96,
  // B = 256 runs 976.7 µs with one stage and four CTAs against 1080.5 with two stages and
  // three (docs/data/ladder_s12/run8); fused q = 4 1391.6 against 1628.5, q = 8 2546.2
  // against 3156.6, record q = 16 5014.0 against 8526.7; record q = 4 and q = 8 (which fit
  // four and three CTAs either way) and per_token within 0.5% (docs/data/ladder_s16/run5).
  int64_t per_sm = spread_ctas_per_sm(ctas, sms);  // 0: not spread
  if (per_sm > prefer_ctas_per_sm) per_sm = 0;
  // a grid spread at up to kStepSpreadCtasPerSm CTAs per SM is laid out for the CTAs that will
  // share an SM (so it takes the stages that fit beside them, not beside four); after that first
  // count, every count from the preferred one down (fp32 append at Qr = 12–16, whose records fit
  // five CTAs but not six, takes five: kStepF32AppendCtasPerSm)
  const int first = per_sm > 0 ? int(per_sm) : small ? 2 : prefer_ctas_per_sm;
  for (int i = 0; i <= prefer_ctas_per_sm; ++i) {
    const int cps = i == 0 ? first : prefer_ctas_per_sm + 1 - i;
    if (cps > prefer_ctas_per_sm) continue;
    for (int st = top; st >= 1; --st) {
      const cuda_config::StepSmem L{q, split, st, state_bytes, records, 2 + q, threads};
      const int64_t bytes = L.bytes();
      if (bytes + 256 > smem_optin || cps * (bytes + kStepSmemPerCtaOverhead) > smem_per_sm) continue;
      // spread: pad the CTA so that ⌈ctas / sms⌉ CTAs fit on an SM and one more does not
      // (counting only the driver's 1 KiB per CTA for the latter)
      if (per_sm > 0 && per_sm < smem_per_sm / (bytes + kStepSmemPerCtaOverhead)) {
        const int64_t pad = (smem_per_sm / (per_sm + 1) - 1024 + 16) / 16 * 16;
        if (pad > bytes && pad + 256 <= smem_optin && per_sm * (pad + kStepSmemPerCtaOverhead) <= smem_per_sm)
          return {st, int(per_sm), pad};
      }
      return {st, cps, bytes};
    }
  }
  return {};
}

/// The last rule of `rules` whose min_items `items` reaches.
template <size_t N>
inline constexpr Variant pick_rule(const AutoRule (&rules)[N], int64_t items) {
  Variant v = rules[0].variant;
  for (const AutoRule& r : rules)
    if (items >= r.min_items) v = r.variant;
  return v;
}

/// The automatic variant for `items` = B·H items of a `mode` step with `q` tokens (`state_bf16`:
/// the layer's state dtype, which has its own decode table).
inline Variant auto_variant(int64_t items, StepMode mode = StepMode::kDecode, int q = 1, bool state_bf16 = false) {
  auto pick = [items](const auto& rules) { return pick_rule(rules, items); };
  switch (mode) {
    case StepMode::kDecode: return state_bf16 ? pick(kDecodeBf16Rules) : pick(kDecodeRules);
    case StepMode::kAppend: return pick(kAppendRules);
    case StepMode::kPerToken: return q == 1 ? pick(kPerTokenQ1Rules) : pick(kPerTokenRules);
    default: return q == 1 ? pick(kVerifyQ1Rules) : q >= 4 ? pick(kVerifyQ4Rules) : pick(kVerifyQ2Rules);
  }
}

/// Gate mode `auto` on CUDA (a layer with F_B whose PreparedKda holds the workspace): mode 1
/// (the gate kernel's one GEMM on tensor cores, then the step on Split / Wide) where it was
/// measured faster than mode 0 with the auto variant, else mode 0. The step overlaps the gate
/// kernel up to its logits (step_kernel.cuh, the late wait) and the gate kernel's CTAs take 16
/// to 64 rows (gate_tile_rows), so what mode 1 still costs is the gate kernel's latency after
/// its own wait, about 1 µs, which only grids of a few hundred items do not hide; mode 0 costs
/// each item its head's 32 KiB of F_B from L2 (same-binary pairs, docs/data/ladder_s19/run2
/// and run3, H ∈ {12, 24, 48, 96} for decode, {12, 96} otherwise):
///   decode from 768 items (0.94–0.98×; at 384 items 0.994–1.026×, at 192 0.999–1.043×, below
///     1.05–1.16×); bf16 state from 384 items (0.947× at 384, 0.81–0.87× from 768; 1.04× at 192);
///   append from 768 items (Qr = 8: 0.83–0.89×; 1.02–1.04× at 192, 1.08–1.10× below);
///   record and fused with 2 ≤ q ≤ 8 always (0.60–0.99× from one request up, a tie at 96 items
///     with q = 2); q = 16 always (ladder_s16/run7: 0.67–0.89×); q = 1 from 6144 items
///     (0.92–0.96×, docs/data/ladder_s13);
///   per_token with q ≥ 4 always (q = 4: 0.93–0.97×, 1.02× at 768 items; q = 8: 0.88–0.96×, a tie
///     at 768); q = 2, 3 always as well since the first waves and the out-gate prefetch (Wide in
///     mode 1 against WS in mode 0: 0.77–0.99× at H = 12 and 96, 96 to 24,576 items, every
///     measured point; docs/data/ladder_s25/run2);
///     under a forced Split / Wide variant per_token takes the record rule instead (SPEC §8's
///     commit = per_token identity: src/plan/plan.cpp).
inline constexpr int64_t kSharedGateMinItems[] = {
    /*decode*/ 768, /*per_token (q >= 4)*/ 1, /*record*/ 1, /*fused*/ 1, /*append*/ 768};
inline constexpr int kSharedGateMinQPerToken = 2;
inline constexpr int64_t kSharedGateMinItemsQ1Verify = 6144;
inline constexpr int64_t kSharedGateMinItemsQ16Verify = 1;
inline constexpr int64_t kSharedGateMinItemsBf16Decode = 384;
inline bool auto_shared_gate(int64_t items, StepMode mode, int q, bool state_bf16 = false) {
  const int64_t min = kSharedGateMinItems[int(mode)];
  switch (mode) {
    case StepMode::kDecode: return items >= (state_bf16 ? kSharedGateMinItemsBf16Decode : min);
    case StepMode::kAppend: return items >= min;
    case StepMode::kPerToken:
      return q >= kSharedGateMinQPerToken && items >= (q == kMaxQ ? kSharedGateMinItemsQ16Verify : min);
    default: return items >= (q == 1 ? kSharedGateMinItemsQ1Verify : q == kMaxQ ? kSharedGateMinItemsQ16Verify : min);
  }
}

/// Step rows per CTA of the gate mode 1 kernel: 16, 32 or kGateRowsPerCta (64; each divides
/// the workspace's whole tiles of 64). The step reads the logits after a wait on the whole gate
/// grid (step_kernel.cuh, the late wait), so at small grids the gate kernel's time after its
/// own wait is on the step's path, and a CTA's chain is one 16 × 32 product per warp and 16-row
/// strip of its tile: the fewest rows per CTA that keep the grid within kGateTargetCtas (about
/// two per SM of an H200; every CTA stages its head's 32 KiB of F_B, so a larger grid reads
/// more of it than its shorter chains save).
inline constexpr int64_t kGateTargetCtas = 264;
inline int gate_tile_rows(int H, int64_t rows) {
  for (int m : {16, 32})
    if (int64_t(H) * ((rows + m - 1) / m) <= kGateTargetCtas) return m;
  return cuda_config::kGateRowsPerCta;
}

/// Gate mode 1: whether the gate kernel stores a step's logits (B·q rows of D fp32, 512 bytes an
/// item and token) with an L2 evict-last policy (gate_kernel.cuh), so that the step, which streams
/// its state through L2 meanwhile, still finds them there, and a Wide step drops them once read
/// (drop_gate_logits). Only while they take at most half the L2. On an H100 (50 MiB of L2;
/// docs/data/ladder_s63, calls ZP and ZR, evict-last and the drop against the tree's plain stores):
/// 12 MiB 0.1–1.2% faster (bf16 and fp32 decode at H = 96, B = 64 … 256 and H = 24, 48, B = 128,
/// 256; fp32 append Qr = 8; record / fused q = 4 at H = 96, B = 64 1.5–2.4%), 24 MiB (q = 4,
/// B = 128) record 1.0% faster, fused a tie, 48 MiB (q = 4, B = 256) 0.5–0.6% slower: the kept
/// lines crowd out the state's own traffic. On an H200 (60 MiB; ladder_s64, half against a third)
/// 24 MiB kept: record / fused q = 4, B = 128 0.6 / 1.7% faster, every other point within 0.4%.
/// Beyond the share the logits take plain stores and stay. l2_bytes 0 (unknown): plain stores.
inline constexpr int64_t kGateLogitsKeepL2Fraction = 2;  ///< keep when logits ≤ L2 / this
inline bool gate_logits_keep_in_l2(int64_t logits_bytes, int64_t l2_bytes) {
  return l2_bytes > 0 && logits_bytes * kGateLogitsKeepL2Fraction <= l2_bytes;
}

/// The variant of a step without the F_B path (gate modes 1 and 2) under `auto`: record and fused
/// at q = 2, 3 by kVerifyQ2RulesWithoutFb, record at q = 4 by kRecordQ4RulesWithoutFb, else the
/// pick of auto_variant with Wide where that is WS. Mode 1: WS reads its gate through its ring in
/// bf16.
/// Mode 2 (the gate precomputed, as vLLM's adapter runs it): Wide beat WS at all 36 verify points
/// measured (q = 2, 4; per_token, record, fused; H = 96, B = 1, 2, 6, 64 and H = 12, B = 16, 32:
/// WS took 1.001–1.98 × Wide's time; docs/data/ladder_s26/run1). WS runs only in gate mode 0.
inline Variant auto_variant_without_fb(int64_t items, StepMode mode, int q, bool state_bf16 = false) {
  if ((mode == StepMode::kRecord || mode == StepMode::kFused) && (q == 2 || q == 3))
    return pick_rule(kVerifyQ2RulesWithoutFb, items);
  if (mode == StepMode::kRecord && q == 4) return pick_rule(kRecordQ4RulesWithoutFb, items);
  const Variant v = auto_variant(items, mode, q, state_bf16);
  return v == Variant::kWS ? Variant::kWide : v;
}

}  // namespace kda::heuristics
