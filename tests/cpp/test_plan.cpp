// The pure host planner and helpers (SPEC §5, §7): plan_step / choose_split with a fake H100-
// class DeviceInfo, stream_ctas, stream_layout, decode_conv_weight, deferred_supported,
// replays, and PreparedKda::plan_for on the CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

#include "api.h"
#include "kda/cuda/config.h"
#include "kda/heuristics.h"
#include "kda/plan.h"
#include "kda/request.h"

namespace kt {
namespace {

using kda::Device;
using kda::DeviceInfo;
using kda::GateMode;
using kda::LayerShape;
using kda::NarrowForm;
using kda::Plan;
using kda::Variant;
using ::testing::HasSubstr;

DeviceInfo gpu(bool clusters = true, int64_t smem = 232448) {
  DeviceInfo d;
  d.device = Device::kCUDA;
  d.sms = 132;
  d.cc_major = 9;
  d.cc_minor = 0;
  d.smem_optin = smem;
  d.clusters = clusters;
  return d;
}
DeviceInfo cpu() { return DeviceInfo{}; }

/// The dynamic shared memory of a Split/Wide plan: the layout's bytes, or on a grid of at
/// most kStepSpreadCtasPerSm CTAs per SM padded so that ⌈ctas / sms⌉ CTAs fit on an SM and one
/// more does not (heuristics::step_layout); never more CTAs per SM than the kernel was compiled
/// for (`max_per_sm`: two for Split at q ≥ 2).
void expect_step_smem(const Plan& p, const DeviceInfo& d, int64_t layout_bytes,
                      int max_per_sm = kda::heuristics::kStepCtasPerSm) {
  const int64_t per_sm_smem = d.smem_per_sm > 0 ? d.smem_per_sm : d.smem_optin + 1024;
  const int64_t per_sm = (p.ctas + d.sms - 1) / d.sms;
  const int64_t fit = per_sm_smem / (layout_bytes + kda::heuristics::kStepSmemPerCtaOverhead);
  EXPECT_LE(p.ctas_per_sm, max_per_sm) << p.describe();
  if (per_sm <= kda::heuristics::kStepSpreadCtasPerSm && per_sm <= max_per_sm && per_sm < fit) {
    EXPECT_GT(p.smem, layout_bytes) << p.describe();
    EXPECT_EQ(p.ctas_per_sm, per_sm) << p.describe();
    EXPECT_LE(per_sm * (p.smem + kda::heuristics::kStepSmemPerCtaOverhead), per_sm_smem) << p.describe();
    EXPECT_GT((per_sm + 1) * (p.smem + 1024), per_sm_smem) << p.describe() << ": one more CTA fits";
  } else {
    EXPECT_EQ(p.smem, layout_bytes) << p.describe();
  }
}

LayerShape shape(int H, bool has_f_b = true, int W = 4) {
  LayerShape l;
  l.H = H;
  l.W = W;
  l.has_f_b = has_f_b;
  return l;
}

Policy pol(Variant v = Variant::kAuto, GateMode g = GateMode::kAuto, int64_t pitch = 0) {
  Policy p;
  p.variant = v;
  p.gate_mode = g;
  p.pitch = pitch;
  return p;
}

const StepMode kModes[] = {StepMode::kDecode, StepMode::kAppend, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused};

TEST(Plan, CpuDevicePlansCpu) {
  for (StepMode m : kModes)
    for (int B : {0, 1, 7, 512})
      for (int q : {1, 4, 16}) {
        if ((m == StepMode::kDecode || m == StepMode::kAppend) && q != 1) continue;
        const StepKey key{m, B, q};
        const Plan p = kda::plan_step(key, pol(), shape(4), cpu());
        EXPECT_EQ(p.variant, Variant::kCpu) << key.describe();
        EXPECT_EQ(p.gate_mode, GateMode::kPerItem);
        EXPECT_TRUE(p.key == key);
        EXPECT_EQ(kda::plan_step(key, pol(Variant::kCpu), shape(4), cpu()).variant, Variant::kCpu);
      }
  // gate modes on the CPU: shared is computed per item, precomputed stays, auto without F_B -> 2
  const StepKey key{StepMode::kRecord, 3, 2};
  EXPECT_EQ(kda::plan_step(key, pol(Variant::kAuto, GateMode::kShared), shape(4), cpu()).gate_mode, GateMode::kPerItem);
  EXPECT_EQ(kda::plan_step(key, pol(Variant::kAuto, GateMode::kPrecomputed), shape(4), cpu()).gate_mode,
            GateMode::kPrecomputed);
  EXPECT_EQ(kda::plan_step(key, pol(), shape(4, false), cpu()).gate_mode, GateMode::kPrecomputed);
  EXPECT_EQ(kda::plan_step(key, pol(Variant::kAuto, GateMode::kAuto, 4321), shape(4), cpu()).pitch, 4321);
}

TEST(Plan, CpuRefusesGpuVariantsNamingTheKey) {
  const StepKey key{StepMode::kFused, 5, 3};
  for (Variant v : {Variant::kSplit, Variant::kWide, Variant::kWS}) {
    const std::string msg = invalid_message([&] { kda::plan_step(key, pol(v), shape(4), cpu()); });
    EXPECT_THAT(msg, HasSubstr(key.describe()));
    EXPECT_THAT(msg, HasSubstr(std::string("'") + kda::variant_name(v) + "'"));
  }
  // gate mode 0 / 1 without F_B
  for (GateMode g : {GateMode::kPerItem, GateMode::kShared}) {
    const std::string msg = invalid_message([&] { kda::plan_step(key, pol(Variant::kAuto, g), shape(4, false), cpu()); });
    EXPECT_THAT(msg, HasSubstr("f_b_weight"));
    EXPECT_THAT(msg, HasSubstr(key.describe()));
  }
}

/// What auto must pick for `items` on `d` (the measured table of kda/heuristics.h, with its
/// fallbacks: WS only where its layout and shared memory fit, Split only with clusters).
Variant expected_auto(int64_t items, StepMode m, const DeviceInfo& d, bool stream_fits, int q = 1, bool bf16 = false) {
  Variant v = kda::heuristics::auto_variant(items, m, q, bf16);
  if (v == Variant::kWS && (!stream_fits || m == StepMode::kAppend)) v = Variant::kWide;
  if (v == Variant::kSplit && !d.clusters) v = Variant::kWide;
  return v;
}

TEST(Plan, AutoFollowsTheMeasuredTable) {
  // NOTE: the table (kda/heuristics.h) comes from the GPU sweeps; with caches that forbid
  // bulk copies (stream_ok = false, as here) auto is Wide everywhere. The test follows the table
  // rather than a fixed expectation, and checks the plan's launch shape for whatever it picks.
  const DeviceInfo d = gpu();
  for (bool clusters : {true, false})
    for (StepMode m : kModes)
      for (int H : {1, 3, 4, 12, 32, 96})
        for (int B : {1, 2, 4, 16, 64, 256})
         for (bool bf16 : {false, true}) {
          const int q = m == StepMode::kDecode || m == StepMode::kAppend ? 1 : 4;
          const int64_t items = int64_t(B) * H;
          const DeviceInfo dd = gpu(clusters);
          LayerShape l = shape(H);  // stream_ok = false
          l.state_bf16 = bf16;
          const Plan p = kda::plan_step({m, B, q}, pol(), l, dd);
          EXPECT_EQ(p.variant, expected_auto(items, m, dd, false, q, bf16))
              << StepKey{m, B, q}.describe() << " H " << H << (bf16 ? " bf16" : "");
          EXPECT_EQ(p.gate_mode, GateMode::kPerItem);
          EXPECT_EQ(p.fallback != nullptr, p.needs_aligned_inputs);
          if (p.variant == Variant::kWide) {
            EXPECT_EQ(p.split, 1);
            EXPECT_EQ(p.ctas, items);
          }
          if (p.variant == Variant::kSplit) {
            EXPECT_EQ(p.split, std::max(2, kda::choose_split(items, d.sms)));
            EXPECT_EQ(p.ctas, items * p.split);
          }
        }
  // the tables themselves: rules sorted by min_items, the first one from 0 items
  auto sorted = [](const auto& rules) {
    EXPECT_EQ(rules[0].min_items, 0);
    for (size_t i = 1; i < std::size(rules); ++i) EXPECT_GT(rules[i].min_items, rules[i - 1].min_items);
  };
  sorted(kda::heuristics::kDecodeRules);
  sorted(kda::heuristics::kDecodeBf16Rules);
  sorted(kda::heuristics::kAppendRules);
  sorted(kda::heuristics::kPerTokenQ1Rules);
  sorted(kda::heuristics::kPerTokenRules);
  sorted(kda::heuristics::kVerifyQ1Rules);
  sorted(kda::heuristics::kVerifyQ4Rules);
  sorted(kda::heuristics::kVerifyQ2Rules);
  sorted(kda::heuristics::kVerifyQ2RulesWithoutFb);
}

TEST(Plan, SmallVerifyWithoutFbRunsWide) {
  // kVerifyQ2RulesWithoutFb, kRecordQ4RulesWithoutFb: record and fused at q = 2, 3 and record at
  // q = 4 run Wide up to 12 items where the step has no F_B path (gate modes 1 and 2); gate mode 0,
  // per_token, fused at q = 4 and the other q keep Split there
  const DeviceInfo d = gpu();
  for (StepMode m : {StepMode::kRecord, StepMode::kFused, StepMode::kPerToken})
    for (int q : {1, 2, 3, 4, 8, 16})
      for (int H : {4, 12})
        for (GateMode g : {GateMode::kPerItem, GateMode::kShared, GateMode::kPrecomputed}) {
          LayerShape l = shape(H, g != GateMode::kPrecomputed);
          l.window = 2 + q;
          l.records = 16;
          l.gate_ws_rows = kda::cuda_config::gate_ws_rows(q);
          const Plan p = kda::plan_step({m, 1, q}, pol(Variant::kAuto, g), l, d);
          const bool wide = g != GateMode::kPerItem && m != StepMode::kPerToken &&
                            (q == 2 || q == 3 || (q == 4 && m == StepMode::kRecord));
          EXPECT_EQ(p.variant, wide ? Variant::kWide : Variant::kSplit)
              << StepKey{m, 1, q}.describe() << " H " << H << " gate mode " << int(p.gate_mode);
          EXPECT_EQ(p.gate_mode, g);
        }
  // from 13 items the tables decide, as before (WS in the tables is Wide without the F_B path)
  EXPECT_EQ(kda::heuristics::auto_variant_without_fb(13, StepMode::kRecord, 2), Variant::kWide);
  EXPECT_EQ(kda::heuristics::auto_variant_without_fb(12, StepMode::kFused, 4), Variant::kSplit);
  EXPECT_EQ(kda::heuristics::auto_variant_without_fb(12, StepMode::kRecord, 5), Variant::kSplit);
  EXPECT_EQ(kda::heuristics::auto_variant_without_fb(13, StepMode::kRecord, 4), Variant::kWide);
  EXPECT_EQ(kda::heuristics::auto_variant(12, StepMode::kRecord, 2), Variant::kSplit) << "gate mode 0's table";
}

TEST(Plan, SplitFactorsKeepOneCtaPerSm) {
  for (int sms : {1, 16, 132, 148})
    for (int64_t items = 1; items <= 2000; ++items) {
      const int s = kda::choose_split(items, sms);
      ASSERT_TRUE(s == 1 || s == 2 || s == 4 || s == 8) << items << " items: split " << s;
      if (s > 1) EXPECT_LE(items * s, sms) << items << " items: split " << s << " puts two CTAs on an SM";
      if (s >= 4) EXPECT_LE(items * s, kda::heuristics::kSplitClusterMaxCtas) << items << " items: clusters of " << s;
      const bool larger_allowed =
          s < kda::heuristics::kMaxSplit && (2 * s < 4 || items * 2 * s <= kda::heuristics::kSplitClusterMaxCtas);
      if (larger_allowed) EXPECT_GT(items * 2 * s, sms) << items << " items: split " << s << " smaller than fits";
    }
  // H200: the auto tables' Split range is the range where the split is at least 2, and for fp32
  // decode from kSplitBalanceMinItems as long as Split 2 takes at most three halves per SM (a grid
  // Wide would give one or two items per SM; kSplitBalanceMaxItems); with bf16
  // state the range where its Split 2 form (two CTAs per SM) runs in one wave; append the first
  for (int64_t items = 1; items <= 400; ++items) {
    const bool balance = items >= kda::heuristics::kSplitBalanceMinItems && items * 2 <= 3 * 132;
    EXPECT_EQ(kda::heuristics::auto_variant(items) == Variant::kSplit, kda::choose_split(items, 132) >= 2 || balance)
        << items;
    EXPECT_EQ(kda::heuristics::auto_variant(items, StepMode::kDecode, 1, true) == Variant::kSplit,
              kda::choose_split(items, 132) >= 2 || items * 2 <= 2 * 132)
        << items << " bf16";
    EXPECT_EQ(kda::heuristics::auto_variant(items, StepMode::kAppend) == Variant::kSplit,
              kda::choose_split(items, 132) >= 2)
        << items << " append";
  }
  // the launch shape of forced Split / Wide plans
  const DeviceInfo d = gpu();
  for (int H : {1, 3, 4, 12, 64})
    for (int B : {1, 2, 5, 33, 200})
      for (int q : {1, 2, 8, 16}) {
        const StepMode m = q == 1 ? StepMode::kDecode : StepMode::kRecord;
        const int64_t items = int64_t(B) * H;
        const Plan p = kda::plan_step({m, B, q}, pol(Variant::kSplit), shape(H), d);
        EXPECT_EQ(p.variant, Variant::kSplit);
        EXPECT_EQ(p.split, std::max(2, kda::choose_split(items, d.sms)));
        EXPECT_EQ(p.ctas, items * p.split);
        EXPECT_EQ(p.threads, kda::cuda_config::kStepThreads);
        expect_step_smem(p, d, kda::cuda_config::StepSmem{q, p.split, p.ring_stages, 4, 0, 2 + q}.bytes(),
                         q == 1 ? kda::heuristics::kStepCtasPerSm : kda::cuda_config::kSmallGridVerifyCtasPerSm);
        EXPECT_GE(p.ring_stages, 1);
        EXPECT_LE(p.ring_stages, kda::cuda_config::chunks_per_cta(p.split, q, 4));
        EXPECT_LE(p.smem, d.smem_optin);
        EXPECT_LE(p.ctas, std::max<int64_t>(items * 2, d.sms)) << "more than one CTA per SM where a smaller split fits";
        const Plan w = kda::plan_step({m, B, q}, pol(Variant::kWide), shape(H), d);
        EXPECT_EQ(w.split, 1);
        EXPECT_EQ(w.ctas, items);
        EXPECT_EQ(w.threads, kda::cuda_config::kStepThreads);
        // the CTAs per SM the plan asks for (five: the dense verify form, which record at q = 2
        // takes beyond a wave of four in gate modes 1 and 2; this layer's gate is mode 0's)
        const int prefer = q == 1 ? kda::heuristics::kStepCtasPerSm
                                  : kda::heuristics::wide_verify_ctas_per_sm(m, q, false, w.gate_mode == GateMode::kPerItem,
                                                                             w.ctas, d.sms);
        expect_step_smem(w, d, kda::cuda_config::StepSmem{q, 1, w.ring_stages, 4, 0, 2 + q}.bytes(), prefer);
        // one stage only where a second would cost a CTA per SM (heuristics::step_layout)
        if (w.ring_stages < 2) {
          const int64_t per_sm = d.smem_per_sm > 0 ? d.smem_per_sm : d.smem_optin + 1024;
          EXPECT_GT(w.ctas_per_sm * (kda::cuda_config::StepSmem{q, 1, 2, 4, 0, 2 + q}.bytes() +
                                     kda::heuristics::kStepSmemPerCtaOverhead),
                    per_sm)
              << "a Wide CTA streams one chunk at a time although two stages fit (q = " << q << ")";
        }
        EXPECT_TRUE(w.ctas_per_sm >= 1 && w.ctas_per_sm <= prefer) << w.describe();
        if (q == 2 && items > 4 * d.sms) EXPECT_EQ(w.ctas_per_sm, prefer) << w.describe() << ": the layout's preference fits";
        // the Wide verify kernels' small-grid form (compiled for two CTAs per SM) runs exactly
        // where the plan lays out at most two: every grid of at most two CTAs per SM, never a
        // larger one at q <= 8 (q = 16's shared memory never fits three)
        if (q != 1) {
          const bool small = kda::cuda_config::small_grid_verify(1, q, w.ctas_per_sm);
          EXPECT_TRUE(small || w.ctas_per_sm > kda::cuda_config::kSmallGridVerifyCtasPerSm) << w.describe();
          if (items <= 2 * d.sms || q == 16) EXPECT_TRUE(small) << w.describe();
          if (items > 2 * d.sms && q <= 8) EXPECT_FALSE(small) << w.describe();
        } else {
          EXPECT_FALSE(kda::cuda_config::small_grid_verify(1, q, w.ctas_per_sm));
        }
      }
}

TEST(Plan, SmallGridsSpreadTheirCtasOverTheSms) {
  // heuristics::kStepSpreadCtasPerSm: the next step's early (PDL) CTAs must not pile up on a
  // few SMs. 96 CTAs: one per SM; 192: two; 384: three; 768: the layout's own shared memory.
  const DeviceInfo d = gpu();
  const int64_t per_sm_smem = d.smem_optin + 1024;
  struct Case {
    Variant v;
    int H, B;
    bool bf16;
    int per_sm;  // 0: not padded
  };
  for (const Case& c : {Case{Variant::kWide, 96, 1, false, 1}, Case{Variant::kWide, 12, 8, true, 1},
                        Case{Variant::kWide, 48, 4, false, 2}, Case{Variant::kWide, 96, 2, true, 2},
                        Case{Variant::kSplit, 12, 1, false, 1}, Case{Variant::kWide, 48, 8, false, 3},
                        Case{Variant::kWide, 96, 4, true, 3}, Case{Variant::kWide, 96, 8, false, 0},
                        Case{Variant::kAuto, 96, 256, false, 0}}) {
    LayerShape l = shape(c.H);
    l.state_bf16 = c.bf16;
    const Plan p = kda::plan_step({StepMode::kDecode, c.B, 1}, pol(c.v), l, d);
    const int64_t layout = kda::cuda_config::StepSmem{1, p.split, p.ring_stages, c.bf16 ? 2 : 4, 0, 3}.bytes();
    if (c.per_sm == 0) {
      EXPECT_EQ(p.smem, layout) << p.describe();
      continue;
    }
    EXPECT_EQ(p.ctas_per_sm, c.per_sm) << p.describe();
    EXPECT_LE(c.per_sm * (p.smem + kda::heuristics::kStepSmemPerCtaOverhead), per_sm_smem) << p.describe();
    EXPECT_GT((c.per_sm + 1) * (p.smem + 1024), per_sm_smem) << p.describe();
  }
}

TEST(Plan, StepsKeepFourCtasPerSmWithOneStage) {
  // An append step stages its pending records: at Qr = 16 two fp32 stages would leave room for
  // only three CTAs per SM; the layout takes one stage and keeps four (heuristics::step_layout).
  // So do verify steps whose records and token scratch would not leave room for two stages.
  const DeviceInfo d = gpu();
  const int64_t per_sm_smem = d.smem_per_sm > 0 ? d.smem_per_sm : d.smem_optin + 1024;
  for (int qr : {4, 8, 16}) {
    LayerShape l = shape(96);
    l.records = qr;
    const Plan p = kda::plan_step({StepMode::kAppend, 256, 1}, pol(Variant::kWide), l, d);
    EXPECT_EQ(p.ctas_per_sm, 4) << "Qr = " << qr;
    EXPECT_EQ(p.ring_stages, qr == 16 ? 1 : 2) << "Qr = " << qr;
  }
  for (int q : {2, 4, 8, 16}) {
    LayerShape l = shape(96);
    l.records = 16;
    const Plan p = kda::plan_step({StepMode::kFused, 256, q}, pol(Variant::kWide), l, d);
    const auto bytes = [&](int stages) {
      return kda::cuda_config::StepSmem{q, 1, stages, 4, 16, 2 + q}.bytes() + kda::heuristics::kStepSmemPerCtaOverhead;
    };
    EXPECT_LE(p.ctas_per_sm * bytes(p.ring_stages), per_sm_smem) << "q = " << q;
    // the stage cap of a large grid
    if (p.ring_stages < kda::heuristics::step_stage_bytes(false, false, p.ctas, d.sms) / (int64_t(32) * 128 * 4))
      EXPECT_GT(p.ctas_per_sm * bytes(p.ring_stages + 1), per_sm_smem) << "q = " << q << ": another stage fits";
    EXPECT_GT((p.ctas_per_sm + 1) * bytes(1), per_sm_smem) << "q = " << q << ": another CTA fits";
  }
}

TEST(Plan, FoldTwinsRunOnlyAtOneCtaPerSm) {
  // cuda_config::launches_fold_twins, the rule the dispatch and the GPU tests share, stated here
  // case by case so that a change to it fails somewhere the shared rule cannot hide it
  using kda::cuda_config::launches_fold_twins;
  EXPECT_TRUE(launches_fold_twins(1, 4, true, 1, false));
  EXPECT_FALSE(launches_fold_twins(1, 4, true, 2, false)) << "two CTAs per SM";
  EXPECT_FALSE(launches_fold_twins(1, 4, true, 1, true)) << "gate mode 0: F_B in the step";
  EXPECT_FALSE(launches_fold_twins(1, 4, false, 1, false)) << "not a fused step";
  EXPECT_FALSE(launches_fold_twins(1, 2, true, 1, false)) << "chunks refilled";
  EXPECT_FALSE(launches_fold_twins(2, 2, true, 1, false)) << "Split";
  // the headline point: fused q = 4 at H = 96 on 132 SMs, one request on a plan of one
  // CTA per SM with every chunk in flight, two requests on two CTAs per SM (gate mode 2)
  for (int B : {1, 2}) {
    const Plan p = kda::plan_step({StepMode::kFused, B, 4}, pol(Variant::kWide, GateMode::kPrecomputed), shape(96), gpu());
    EXPECT_EQ(launches_fold_twins(p.split, p.ring_stages, true, p.ctas_per_sm, p.gate_mode == GateMode::kPerItem),
              B == 1)
        << p.describe();
  }
}

TEST(Plan, DenseVerifyFormWhereFiveCtasPerSmWin) {
  // heuristics::wide_verify_ctas_per_sm, case by case on an H200 (132 SMs: 528 CTAs are one wave
  // of four, 660 one of five), so that a change to the rule fails here and not only in the timings
  DeviceInfo d = gpu();
  d.smem_per_sm = 233472;
  auto plan = [&](StepMode m, int q, int B, bool bf16 = false, GateMode g = GateMode::kShared, int records = 0) {
    LayerShape l = shape(96);
    l.state_bf16 = bf16;
    l.records = records > 0 ? records : q;
    l.window = 2 + q;
    l.gate_ws_rows = INT64_MAX;
    return kda::plan_step({m, B, q}, pol(Variant::kWide, g), l, d);
  };
  constexpr int kDense = kda::cuda_config::kDenseVerifyCtasPerSm;
  struct Case {
    StepMode m;
    int q, B;
    bool bf16;
    int per_sm;
  };
  const StepMode R = StepMode::kRecord, F = StepMode::kFused, P = StepMode::kPerToken;
  for (const Case& c : {
           // record: beyond one wave of four, at every q the form has, both dtypes
           Case{R, 4, 5, false, 4}, Case{R, 4, 6, false, kDense}, Case{R, 4, 8, false, kDense},
           Case{R, 4, 256, false, kDense}, Case{R, 2, 6, false, kDense}, Case{R, 3, 32, true, kDense},
           // fused: one wave at five where four need two; beyond, fewer waves at five, q = 4 or bf16
           Case{F, 4, 6, false, kDense}, Case{F, 4, 7, false, 4}, Case{F, 4, 8, false, 4}, Case{F, 4, 16, false, 4},
           Case{F, 4, 32, false, kDense}, Case{F, 4, 256, false, kDense}, Case{F, 2, 6, false, kDense},
           Case{F, 2, 32, false, 4}, Case{F, 3, 256, false, 4}, Case{F, 2, 32, true, kDense},
           Case{F, 4, 256, true, kDense},
           // per_token (bound by its state stores), q without the form, small grids
           Case{P, 4, 6, false, 4}, Case{P, 2, 256, true, 4}, Case{R, 8, 6, false, 4}, Case{R, 5, 6, false, 4},
           Case{R, 4, 2, false, 2}}) {
    const Plan p = plan(c.m, c.q, c.B, c.bf16);
    const std::string what = std::string(kda::mode_name(c.m)) + " q " + std::to_string(c.q) + " B " +
                             std::to_string(c.B) + (c.bf16 ? " bf16" : " fp32") + ": " + p.describe();
    EXPECT_EQ(p.ctas_per_sm, c.per_sm) << what;
    EXPECT_LE(p.ctas_per_sm * (p.smem + kda::heuristics::kStepSmemPerCtaOverhead), d.smem_per_sm) << what;
    if (p.ctas_per_sm == kDense) {
      EXPECT_TRUE(kda::cuda_config::has_dense_verify_form(p.split, c.q, false)) << what;
      EXPECT_FALSE(kda::cuda_config::small_grid_verify(p.split, c.q, p.ctas_per_sm)) << what;
    }
  }
  // gate mode 0 runs the run-time-q kernel with the F_B path, which has no dense form
  EXPECT_EQ(plan(R, 4, 6, false, GateMode::kPerItem).ctas_per_sm, 4);
  EXPECT_EQ(plan(R, 4, 6, false, GateMode::kPrecomputed).ctas_per_sm, kDense) << "gate mode 2";
  // the layout takes fewer where five do not fit: a fused step staging 16 records
  const Plan big = plan(F, 4, 6, false, GateMode::kShared, 16);
  EXPECT_LT(big.ctas_per_sm, kDense) << big.describe();
  EXPECT_GT(kDense * (kda::cuda_config::StepSmem{4, 1, 1, 4, 16, 6}.bytes() + kda::heuristics::kStepSmemPerCtaOverhead),
            d.smem_per_sm);
  // the automatic variant reaches it (Wide from 192 items at q >= 4)
  const Plan a = kda::plan_step({R, 6, 4}, pol(), [] {
    LayerShape l = shape(96);
    l.gate_ws_rows = INT64_MAX;
    return l;
  }(), d);
  EXPECT_EQ(a.variant, Variant::kWide);
  EXPECT_EQ(a.ctas_per_sm, kDense) << a.describe();
}

TEST(Plan, StateStagesFollowTheGridAndTheGateMode) {
  // heuristics::step_stage_bytes: fp32 state keeps two 16 KiB stages in flight per CTA; a decode
  // step keeps three in a spread grid of three CTAs per SM (its CTAs are padded to that share
  // anyway), and one that reads no F_B (gate modes 1 and 2) from kStepMoreStagesMinCtas CTAs;
  // four CTAs per SM where not spread; bf16 state (8 KiB stages) takes every chunk; fp32 append
  // keeps two, one where it runs six CTAs per SM (heuristics::kStepF32AppendCtasPerSm).
  const DeviceInfo d = gpu();
  struct Case {
    int H, B;
    GateMode g;
    int fp32_stages, ctas_per_sm;
  };
  for (const Case& c : {Case{48, 8, GateMode::kPerItem, 3, 3}, Case{48, 8, GateMode::kShared, 3, 3},
                        Case{48, 8, GateMode::kPrecomputed, 3, 3}, Case{96, 8, GateMode::kPerItem, 2, 4},
                        Case{96, 8, GateMode::kShared, 2, 4}, Case{96, 32, GateMode::kPrecomputed, 2, 4},
                        Case{96, 64, GateMode::kPerItem, 2, 4}, Case{96, 64, GateMode::kShared, 3, 4},
                        Case{96, 256, GateMode::kPrecomputed, 3, 4}, Case{96, 256, GateMode::kPerItem, 2, 4}})
    for (bool bf16 : {false, true}) {
      LayerShape l = shape(c.H, c.g != GateMode::kPrecomputed);
      l.state_bf16 = bf16;
      l.gate_ws_rows = 1024;
      const Plan p = kda::plan_step({StepMode::kDecode, c.B, 1}, pol(Variant::kWide, c.g), l, d);
      const std::string what = p.describe();
      EXPECT_EQ(p.gate_mode, c.g) << what;
      EXPECT_EQ(p.ring_stages, bf16 ? 4 : c.fp32_stages) << what;  // (d: no DRAM bandwidth, so no narrow form)
      // bf16 without F_B: six CTAs of 256 threads per SM up to one wave of them, the narrow form beyond
      const bool lean = bf16 && c.g != GateMode::kPerItem && c.ctas_per_sm == 4;
      const bool narrow = lean && kda::heuristics::narrow_step(p.ctas, d.sms, d.dram_gbps);
      const int per_sm = narrow ? kda::cuda_config::kNarrowCtasPerSm
                         : lean ? kda::heuristics::kStepBf16Q1CtasPerSm
                                : kda::heuristics::kStepCtasPerSm;
      EXPECT_EQ(p.threads, narrow ? kda::cuda_config::kNarrowThreads : kda::cuda_config::kStepThreads) << what;
      EXPECT_EQ(p.ctas_per_sm, lean ? per_sm : c.ctas_per_sm) << what;
      expect_step_smem(p, d, kda::cuda_config::StepSmem{1, 1, p.ring_stages, bf16 ? 2 : 4, 0, 3, p.threads}.bytes(),
                       per_sm);
      if (!bf16 && c.g != GateMode::kPerItem) {  // append: two, one at six CTAs per SM
        LayerShape la = l;
        la.records = 8;
        const Plan pa = kda::plan_step({StepMode::kAppend, c.B, 1}, pol(Variant::kWide, c.g), la, d);
        const bool six_a = c.ctas_per_sm == 4;  // not spread
        EXPECT_EQ(pa.ctas_per_sm, six_a ? kda::heuristics::kStepF32AppendCtasPerSm : c.ctas_per_sm) << pa.describe();
        EXPECT_EQ(pa.ring_stages, six_a && kda::heuristics::kStepF32AppendCtasPerSm == 6 ? 1 : 2) << pa.describe();
      }
    }
}

TEST(Plan, SharedGateWhereTheWorkspaceHoldsTheStep) {
  // gate mode 1 needs the PreparedKda's workspace: `auto` takes it where
  // heuristics::auto_shared_gate says so and the workspace holds the key's rows (whole 64-row
  // gate tiles), on Split / Wide (never WS), and mode 0 elsewhere; forced, it names what is
  // missing.
  const DeviceInfo d = gpu();
  for (StepMode m : {StepMode::kDecode, StepMode::kAppend, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
   for (int q : {1, 2, 3, 4, 8, 16}) {
    if ((m == StepMode::kDecode || m == StepMode::kAppend) && q != 1) continue;
    // per_token with one token: the Split / Wide q = 1 kernel in mode 0 at every size
    if (m == StepMode::kPerToken && q == 1) {
      EXPECT_FALSE(kda::heuristics::auto_shared_gate(int64_t(1) << 20, m, q)) << "per_token q = " << q;
      continue;
    }
    const int H = 96;
    int B = 1;
    while (!kda::heuristics::auto_shared_gate(int64_t(H) * B, m, q)) ++B;  // the first B past the threshold
    // with the late wait the gate kernel pays back at one request for the verify kinds with
    // q >= 2 (docs/data/ladder_s19/run3); decode, append and q = 1 verify need more items
    if (q >= 2)
      ASSERT_EQ(B, 1) << kda::mode_name(m);
    else
      ASSERT_GT(B, 1) << kda::mode_name(m) << ": mode 1 at one request";
    if (q == 4) EXPECT_TRUE(kda::heuristics::auto_shared_gate(1, m, q)) << kda::mode_name(m) << ": one item";
    LayerShape l = shape(H);
    l.stream_ok = true;
    l.window = 2 + q;
    l.records = 4;
    l.gate_ws_rows = kda::cuda_config::gate_ws_rows(int64_t(B) * q);
    const Plan p = kda::plan_step({m, B, q}, pol(), l, d);
    EXPECT_EQ(p.gate_mode, GateMode::kShared) << kda::mode_name(m);
    EXPECT_EQ(p.gate_ws_rows, l.gate_ws_rows);
    EXPECT_NE(p.variant, Variant::kWS);
    if (B > 1)
      EXPECT_EQ(kda::plan_step({m, B - 1, q}, pol(), l, d).gate_mode, GateMode::kPerItem) << "below the threshold";
    LayerShape small = l;
    small.gate_ws_rows = l.gate_ws_rows - 64;
    EXPECT_EQ(kda::plan_step({m, B, q}, pol(), small, d).gate_mode, GateMode::kPerItem) << "no workspace for it";
    if (m != StepMode::kAppend && q != 16)  // WS has no append path and no room for q = 16
      EXPECT_EQ(kda::plan_step({m, B, q}, pol(Variant::kWS), l, d).gate_mode, GateMode::kPerItem) << "ws forced";
    EXPECT_EQ(kda::plan_step({m, B, q}, pol(Variant::kAuto, GateMode::kPerItem), l, d).gate_mode, GateMode::kPerItem);
    EXPECT_EQ(kda::plan_step({m, B, q}, pol(Variant::kAuto, GateMode::kShared), l, d).gate_mode, GateMode::kShared);
    EXPECT_EQ(kda::plan_step({m, 1, q}, pol(Variant::kWide, GateMode::kShared), l, d).gate_ws_rows, 64);
    EXPECT_EQ(kda::plan_step({m, B, q}, pol(), l, cpu()).gate_mode, GateMode::kPerItem) << "the CPU runs mode 0";
    LayerShape bf = l;
    bf.state_bf16 = true;
    EXPECT_EQ(kda::plan_step({m, B, q}, pol(), bf, d).gate_mode, GateMode::kShared) << "bf16 state";
  }
  // bf16 decode takes mode 1 from its own threshold (its Wide kernel runs six CTAs per SM)
  const int H = 96;
  int B = 1;
  while (!kda::heuristics::auto_shared_gate(int64_t(H) * B, StepMode::kDecode, 1, /*state_bf16=*/true)) ++B;
  EXPECT_LT(B, 64) << "bf16 decode pays from fewer items than fp32";
  LayerShape bf = shape(H);
  bf.state_bf16 = true;
  bf.gate_ws_rows = kda::cuda_config::gate_ws_rows(B);
  EXPECT_EQ(kda::plan_step({StepMode::kDecode, B, 1}, pol(), bf, d).gate_mode, GateMode::kShared);
  EXPECT_EQ(kda::plan_step({StepMode::kDecode, B - 1, 1}, pol(), bf, d).gate_mode, GateMode::kPerItem);
}

TEST(Plan, GateLogitsKeptInL2UpToHalfOfIt) {
  // heuristics::gate_logits_keep_in_l2: the gate kernel stores a step's B·q·H·512 bytes of logits
  // evict-last while they take at most half the L2, plain stores beyond it or where the L2 is
  // unknown; the workspace's padding rows do not count
  const int H = 96;
  DeviceInfo d = gpu();
  d.l2_bytes = int64_t(50) << 20;  // an H100's
  auto plan = [&](StepMode m, int B, int q, const DeviceInfo& dev) {
    LayerShape l = shape(H);
    l.stream_ok = true;
    l.window = 2 + q;
    l.records = 4;
    l.gate_ws_rows = kda::cuda_config::gate_ws_rows(int64_t(B) * q);
    return kda::plan_step({m, B, q}, pol(Variant::kAuto, GateMode::kShared), l, dev);
  };
  const int64_t item_bytes = int64_t(H) * kda::kHeadDim * 4;
  const int64_t last_kept = d.l2_bytes / 2 / item_bytes;  // rows B·q
  for (StepMode m : {StepMode::kDecode, StepMode::kAppend, StepMode::kRecord, StepMode::kFused}) {
    const int q = m == StepMode::kDecode || m == StepMode::kAppend ? 1 : 4;
    const int B = int(last_kept / q);
    EXPECT_TRUE(plan(m, B, q, d).gate_ws_keep) << kda::mode_name(m) << " B " << B;
    EXPECT_FALSE(plan(m, B + 1, q, d).gate_ws_keep) << kda::mode_name(m) << " B " << B + 1;
    EXPECT_TRUE(plan(m, 1, q, d).gate_ws_keep) << kda::mode_name(m);
    EXPECT_FALSE(plan(m, 1, q, gpu()).gate_ws_keep) << kda::mode_name(m) << ": L2 unknown";
  }
  // the sizes measured (docs/data/ladder_s63): 12 and 24 MiB kept; 48 MiB not
  EXPECT_TRUE(plan(StepMode::kDecode, 256, 1, d).gate_ws_keep);
  EXPECT_TRUE(plan(StepMode::kFused, 64, 4, d).gate_ws_keep);
  EXPECT_TRUE(plan(StepMode::kRecord, 128, 4, d).gate_ws_keep);
  EXPECT_TRUE(plan(StepMode::kFused, 128, 4, d).gate_ws_keep);
  EXPECT_FALSE(plan(StepMode::kFused, 256, 4, d).gate_ws_keep);
  EXPECT_FALSE(plan(StepMode::kRecord, 256, 4, d).gate_ws_keep);
  EXPECT_THAT(plan(StepMode::kDecode, 256, 1, d).describe(), HasSubstr("kept in L2"));
  EXPECT_FALSE(kda::plan_step({StepMode::kDecode, 256, 1}, pol(Variant::kAuto, GateMode::kPerItem), shape(H), d)
                   .gate_ws_keep)
      << "no gate kernel in mode 0";
}

TEST(Plan, ForcedVariantsGivePerTokenTheRecordStepsGateMode) {
  // SPEC §8: commit(n) after a record step equals the per-token state after n tokens, bitwise,
  // within one forced variant; gate modes 0 and 1 give different bits, so a forced Split / Wide
  // per_token step takes the record step's gate mode under gate mode `auto` (src/plan/plan.cpp).
  // The automatic variant keeps per_token's own rule (WS's mode 0 below q = 4).
  const DeviceInfo d = gpu();
  auto layer = [](int q) {
    LayerShape l = shape(96);
    l.stream_ok = true;
    l.window = 2 + q;
    l.records = 16;
    l.gate_ws_rows = INT64_MAX;
    return l;
  };
  int aligned = 0;
  for (Variant v : {Variant::kSplit, Variant::kWide, Variant::kWS})
    for (int q : {1, 2, 3, 4, 8, 16})
      for (int B : {1, 8, 64, 256}) {
        if (v == Variant::kWS && q == 16) continue;  // no room for q = 16 in WS's ring
        const LayerShape l = layer(q);
        Plan pt, rec;
        try {
          pt = kda::plan_step({StepMode::kPerToken, B, q}, pol(v), l, d);
          rec = kda::plan_step({StepMode::kRecord, B, q}, pol(v), l, d);
        } catch (const std::invalid_argument&) {
          ASSERT_EQ(v, Variant::kWS) << "only a forced 'ws' may refuse (its ring stages)";
          continue;
        }
        EXPECT_EQ(pt.gate_mode, rec.gate_mode) << kda::variant_name(v) << " q " << q << " B " << B;
        if (v == Variant::kWS) EXPECT_EQ(pt.gate_mode, GateMode::kPerItem);
        aligned += pt.gate_mode == GateMode::kShared;
      }
  EXPECT_GT(aligned, 0);
  // under the automatic variant per_token keeps its own rule (q = 1: mode 0 at every size;
  // record from 6144 items)
  const LayerShape l = layer(2);
  EXPECT_EQ(kda::plan_step({StepMode::kPerToken, 4096, 1}, pol(), l, d).gate_mode, GateMode::kPerItem);
  EXPECT_EQ(kda::plan_step({StepMode::kRecord, 4096, 1}, pol(), l, d).gate_mode, GateMode::kShared);
}

TEST(Plan, Bf16SingleTokenWideRunsSixCtasPerSm) {
  // q = 1 Wide steps with bf16 state in gate modes 1 and 2 have a kernel cut for six CTAs per
  // SM (heuristics::kStepBf16Q1CtasPerSm), and fp32 append steps there too
  // (kStepF32AppendCtasPerSm); gate mode 0 (its F_B registers), fp32 decode,
  // verify steps and grids that do not fill the GPU twice keep the four-CTA layout rules.
  DeviceInfo d = gpu();
  d.smem_per_sm = 233472;  // the H200's
  d.dram_gbps = 4800;
  auto plan = [&](StepMode m, int q, bool bf16, GateMode g, int records = 8, int B = 256,
                  NarrowForm narrow = NarrowForm::kAuto) {
    LayerShape l = shape(96);
    l.state_bf16 = bf16;
    l.records = records;
    l.window = 2 + q;
    l.gate_ws_rows = INT64_MAX;
    Policy po = pol(Variant::kWide, g);
    po.narrow = narrow;
    return kda::plan_step({m, B, q}, po, l, d);
  };
  for (GateMode g : {GateMode::kShared, GateMode::kPrecomputed}) {
    for (int qr : {4, 8, 16}) {
      const Plan a = plan(StepMode::kAppend, 1, true, g, qr);
      EXPECT_EQ(a.ctas_per_sm, kda::heuristics::kStepBf16Q1CtasPerSm) << "append Qr = " << qr;
      EXPECT_LE(a.ctas_per_sm * (a.smem + kda::heuristics::kStepSmemPerCtaOverhead), d.smem_per_sm);
    }
    // bf16 decode and per_token: the narrow form beyond one wave of six CTAs per SM (heuristics::narrow_step), its
    // stages at eight CTAs per SM (three 16-row chunks); the 256-thread six-CTA form up to one wave, every
    // chunk in flight
    for (StepMode m : {StepMode::kDecode, StepMode::kPerToken}) {
      const Plan p = plan(m, 1, true, g);
      EXPECT_EQ(p.threads, kda::cuda_config::kNarrowThreads) << mode_name(m);
      EXPECT_EQ(p.ctas_per_sm, kda::cuda_config::kNarrowCtasPerSm) << mode_name(m);
      EXPECT_EQ(p.ring_stages, kda::heuristics::kNarrowStages) << mode_name(m);
      EXPECT_EQ(p.smem, (kda::cuda_config::StepSmem{1, 1, p.ring_stages, 2, 0, 3, p.threads}.bytes())) << mode_name(m);
      EXPECT_LE(p.ctas_per_sm * (p.smem + kda::heuristics::kStepSmemPerCtaOverhead), d.smem_per_sm);
      const int one_wave = kda::heuristics::kStepBf16Q1CtasPerSm * d.sms / 96;  // B of one wave of six at H = 96
      const Plan s = plan(m, 1, true, g, 8, one_wave);
      EXPECT_EQ(s.threads, kda::cuda_config::kStepThreads) << mode_name(m) << " one wave of six";
      EXPECT_EQ(s.ctas_per_sm, kda::heuristics::kStepBf16Q1CtasPerSm) << mode_name(m);
      EXPECT_EQ(s.ring_stages, kda::cuda_config::chunks_per_cta(1, 1, 2)) << "a bf16 item's state in flight at once";
      EXPECT_LE(s.ctas_per_sm * (s.smem + kda::heuristics::kStepSmemPerCtaOverhead), d.smem_per_sm);
      EXPECT_EQ(plan(m, 1, true, g, 8, one_wave + 1).threads, kda::cuda_config::kNarrowThreads) << mode_name(m);
      // the policy: 'off' keeps the six; 'on' takes the narrow form beyond one wave of six only
      EXPECT_EQ(plan(m, 1, true, g, 8, 256, NarrowForm::kOff).threads, kda::cuda_config::kStepThreads);
      EXPECT_EQ(plan(m, 1, true, g, 8, one_wave, NarrowForm::kOn).threads, kda::cuda_config::kStepThreads);
      // a device of less DRAM bandwidth per SM (an H100's 3.35 TB/s over 132 SMs) keeps the six unless asked
      d.dram_gbps = 3350;
      EXPECT_EQ(plan(m, 1, true, g).threads, kda::cuda_config::kStepThreads) << mode_name(m);
      EXPECT_EQ(plan(m, 1, true, g, 8, 256, NarrowForm::kOn).threads, kda::cuda_config::kNarrowThreads);
      d.dram_gbps = 4800;
    }
    // append (the recording kinds) and fp32 never take it
    EXPECT_EQ(plan(StepMode::kAppend, 1, true, g, 8, 256, NarrowForm::kOn).threads, kda::cuda_config::kStepThreads);
    EXPECT_EQ(plan(StepMode::kDecode, 1, false, g, 8, 256, NarrowForm::kOn).threads, kda::cuda_config::kStepThreads);
    EXPECT_EQ(plan(StepMode::kDecode, 1, false, g).ctas_per_sm, 4) << "fp32 decode";
    for (int qr : {4, 8, 16}) {
      const Plan a = plan(StepMode::kAppend, 1, false, g, qr);
      // Qr = 16: six CTAs' staged records do not fit beside a stage; five (every count below the preferred)
      EXPECT_EQ(a.ctas_per_sm, qr < 16 ? kda::heuristics::kStepF32AppendCtasPerSm : 5) << "fp32 append Qr = " << qr;
      EXPECT_LE(a.ctas_per_sm * (a.smem + kda::heuristics::kStepSmemPerCtaOverhead), d.smem_per_sm);
    }
    EXPECT_EQ(plan(StepMode::kRecord, 4, true, g).ctas_per_sm, kda::cuda_config::kDenseVerifyCtasPerSm)
        << "verify steps: the dense form";
    EXPECT_EQ(plan(StepMode::kDecode, 1, true, g, 8, 2).ctas_per_sm, 2) << "a grid that does not fill the GPU twice";
  }
  EXPECT_EQ(plan(StepMode::kDecode, 1, true, GateMode::kPerItem).ctas_per_sm, 4) << "gate mode 0";
  EXPECT_EQ(plan(StepMode::kAppend, 1, false, GateMode::kPerItem).ctas_per_sm, 4) << "fp32 append, gate mode 0";
}

TEST(Plan, Bf16SplitTwoTakesItsRowsAsOneChunk) {
  // Split 2 with bf16 state at q = 1: one 64-row chunk (16 KiB), a kernel compiled for two CTAs per
  // SM (cuda_config::split2_bf16_q1_one_chunk); fp32, other splits and q > 1 keep 32-row chunks.
  DeviceInfo d = gpu();
  d.smem_per_sm = 233472;
  auto plan = [&](StepMode m, int H, int B, int q, bool bf16, Variant v = Variant::kAuto) {
    LayerShape l = shape(H);
    l.state_bf16 = bf16;
    l.records = 8;
    l.window = 2 + q;
    l.gate_ws_rows = INT64_MAX;
    return kda::plan_step({m, B, q}, pol(v), l, d);
  };
  for (StepMode m : {StepMode::kDecode, StepMode::kAppend, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
    for (int H : {32, 48, 64}) {
      // (auto takes Split at these sizes for decode and append; the verify kinds are forced)
      const Variant v = m == StepMode::kDecode || m == StepMode::kAppend ? Variant::kAuto : Variant::kSplit;
      const Plan p = plan(m, H, 1, 1, true, v);
      ASSERT_EQ(p.split, 2) << p.describe();
      EXPECT_EQ(p.ring_stages, 1) << p.describe();
      EXPECT_EQ(p.ctas_per_sm, 1) << "one request: spread one CTA per SM; " << p.describe();
      EXPECT_EQ(p.smem % 16, 0);
      const int recs = m == StepMode::kAppend || m == StepMode::kFused ? 8 : 0;
      EXPECT_GE(p.smem, (kda::cuda_config::StepSmem{1, 2, 1, 2, recs, 3}.bytes())) << "one 16 KiB stage";
      const Plan f = plan(m, H, 1, 1, false, v);
      EXPECT_EQ(f.split, 2);
      EXPECT_EQ(f.ring_stages, 2) << "fp32: two 32-row chunks, both in flight; " << f.describe();
    }
  EXPECT_EQ(kda::cuda_config::chunk_rows(2, 1, 2), 64);
  EXPECT_EQ(kda::cuda_config::chunk_rows(2, 1, 4), 32);
  EXPECT_EQ(kda::cuda_config::chunk_rows(2, 4, 2), 32) << "verify steps";
  EXPECT_EQ(kda::cuda_config::chunk_rows(2, 0, 2), 32) << "q at run time";
  EXPECT_EQ(kda::cuda_config::chunk_rows(4, 1, 2), 32);
  EXPECT_EQ(kda::cuda_config::chunk_rows(8, 1, 2), 16);
  EXPECT_EQ(kda::cuda_config::split_q1_min_blocks(2, 2), 2);
  EXPECT_EQ(kda::cuda_config::split_q1_min_blocks(2, 4), 4);
  EXPECT_EQ(kda::cuda_config::split_q1_min_blocks(4, 2), 4);
  // forced on a grid larger than the SMs: no more CTAs per SM than the kernel is compiled for
  const Plan big = plan(StepMode::kDecode, 96, 3, 1, true, Variant::kSplit);
  EXPECT_EQ(big.split, 2);
  EXPECT_LE(big.ctas_per_sm, 2) << big.describe();
}

TEST(Plan, WsPlansARingThatFits) {
  // WS: one persistent CTA per SM, 2..4 ring stages within the opt-in shared memory; refused
  // (naming 'ws') where two stages do not fit, the window is short or the layout forbids
  // 16-byte bulk copies.
  const DeviceInfo d = gpu();
  for (StepMode m : kModes)
    for (int q : {1, 4, 8, 16}) {
      if ((m == StepMode::kDecode || m == StepMode::kAppend) && q != 1) continue;
      if (m == StepMode::kAppend) {  // WS has no append path
        LayerShape l = shape(4);
        l.stream_ok = true;
        l.window = 3;
        EXPECT_THAT(invalid_message([&] { kda::plan_step({m, 8, 1}, pol(Variant::kWS), l, d); }), HasSubstr("no append path"));
        continue;
      }
      for (int64_t B : {1, 7, 100, 1000}) {
        for (bool bf16 : {false, true}) {
          LayerShape l = shape(4);
          l.stream_ok = true;
          l.window = 2 + q;
          l.conv_bytes = 2;
          l.state_bf16 = bf16;
          const StepKey key{m, int(B), q};
          const kda::cuda_config::WsSmem ws{{q, l.window, 2, bf16 ? 2 : 4, m == StepMode::kFused ? int(l.records) : 0}};
          const int stages = ws.stages_for(d.smem_optin - 1024);
          if (stages < 2) {
            EXPECT_THAT(invalid_message([&] { kda::plan_step(key, pol(Variant::kWS), l, d); }), HasSubstr("'ws'")) << key.describe();
            continue;
          }
          const Plan p = kda::plan_step(key, pol(Variant::kWS), l, d);
          EXPECT_EQ(p.variant, Variant::kWS) << key.describe();
          EXPECT_EQ(p.ring_stages, stages);
          EXPECT_GE(p.ring_stages, 2);
          EXPECT_LE(p.ring_stages, kda::cuda_config::kWsMaxStages);
          EXPECT_LE(p.smem + 1024, d.smem_optin) << key.describe();
          EXPECT_EQ(p.threads, kda::cuda_config::kWsThreads);
          const int64_t items = B * 4;
          EXPECT_LE(p.ctas, int64_t(d.sms));
          EXPECT_GE(p.ctas * p.items_per_cta, items) << key.describe();
          EXPECT_LT((p.ctas - 1) * p.items_per_cta, items) << "an idle persistent CTA, " << key.describe();
        }
      }
      LayerShape bad = shape(4);
      bad.window = 2 + q;
      const StepKey key{m, 8, q};
      EXPECT_THAT(invalid_message([&] { kda::plan_step(key, pol(Variant::kWS), bad, d); }), HasSubstr("'ws'"));
      bad.stream_ok = true;
      bad.window = 1 + q;
      EXPECT_THAT(invalid_message([&] { kda::plan_step(key, pol(Variant::kWS), bad, d); }), HasSubstr("'ws'"));
    }
  // the common shapes get a ring that overlaps at least one item's loads with compute
  LayerShape l = shape(32);
  l.stream_ok = true;
  l.window = 6;
  EXPECT_GE(kda::plan_step({StepMode::kDecode, 64, 1}, pol(Variant::kWS), l, d).ring_stages, 3);
  EXPECT_GE(kda::plan_step({StepMode::kRecord, 64, 4}, pol(Variant::kWS), l, d).ring_stages, 2);
}

TEST(Plan, WsAndStreamStageRegionsAreDisjointAndAligned) {
  // Regression: a WS stage kept 32 bytes for the 36-byte RequestPlan and the
  // beta logits stored after it overwrote `pending` (fused steps only). Every region of a
  // stage must hold what is copied or stored into it, in order, 16-byte aligned (bulk-copy
  // destinations), for every q, window, element size and mode.
  using kda::cuda_config::StreamSmem;
  using kda::cuda_config::WsSmem;
  constexpr int64_t K = kda::kHeadDim;
  for (int q = 1; q <= kda::kMaxQ; ++q)
    for (int window = q + 2; window <= q + 5; ++window)
      for (int cb : {2, 4})
        for (int sb : {2, 4})
          for (int records : {0, q, q + 3, kda::kMaxQ}) {  // fused: the row's Qr (≥ q); else 0
            const bool fused = records > 0;
            const StreamSmem o{q, window, cb, sb, records};
            const std::string what = "q " + std::to_string(q) + " window " + std::to_string(window) + " conv " +
                                     std::to_string(cb) + " state " + std::to_string(sb) + " records " + std::to_string(records);
            // operand stage: window | x | f_a | out gate | per-token slots | records
            EXPECT_LE(3 * K * window * cb, o.x_off()) << what;
            EXPECT_LE(o.x_off() + int64_t(q) * 3 * K * 2, o.fa_off()) << what;
            EXPECT_LE(o.fa_off() + int64_t(q) * K * 2, o.og_off()) << what;
            EXPECT_LE(o.og_off() + int64_t(q) * K * 2, o.slots_off()) << what;
            EXPECT_LE(o.slots_off() + kda::kMaxQ * 4, o.rec_off()) << what;
            if (fused) EXPECT_LE(o.rec_off() + o.rec_cap() * 3 * K * 4, o.stage_size()) << what;
            EXPECT_EQ(o.rec_cap(), records) << what;  // pending <= Qr (SPEC §4)
            for (int64_t off : {o.win_off(), o.x_off(), o.fa_off(), o.og_off(), o.slots_off(), o.rec_off()})
              EXPECT_EQ(off % 16, 0) << what;
            // WS ring stage: state | operands | plan | beta[16]
            const WsSmem w{o};
            EXPECT_EQ(w.state_size(), K * K * sb);
            EXPECT_EQ(w.ops_off(), w.state_size());
            EXPECT_LE(w.ops_off() + o.stage_size(), w.plan_off()) << what;
            EXPECT_LE(w.plan_off() + int64_t(sizeof(kda::RequestPlan)), w.beta_off()) << what;
            EXPECT_LE(w.beta_off() + kda::kMaxQ * 4, w.stage_size()) << what;
            EXPECT_EQ(w.stage_size() % 128, 0) << what;
            for (int64_t off : {w.ops_off(), w.plan_off(), w.beta_off()}) EXPECT_EQ(off % 16, 0) << what;
          }
}

TEST(Plan, WsFusedStagesHoldEveryPendingRecord) {
  // SPEC §4: pending may be any count up to Qr, beyond q and the window's taps; a WS ring stage
  // must hold Qr records (it once held max(q, window − 2): the fuzzer's seed 20261901:384).
  const DeviceInfo d = gpu();
  for (int q : {1, 2, 4})
    for (int qr : {q, q + 2, 8, 16}) {
      LayerShape l = shape(4);
      l.stream_ok = true;
      l.window = 2 + q;
      l.conv_bytes = 2;
      l.records = qr;
      const StepKey key{StepMode::kFused, 8, q};
      const kda::cuda_config::WsSmem ws{{q, l.window, 2, 4, qr}};
      EXPECT_EQ(ws.ops.rec_cap(), qr);
      const int stages = ws.stages_for(d.smem_optin - 1024);
      if (stages < 2) continue;
      const Plan p = kda::plan_step(key, pol(Variant::kWS), l, d);
      EXPECT_EQ(p.ring_stages, stages) << key.describe() << " Qr " << qr;
      EXPECT_EQ(p.smem, ws.bytes(stages)) << key.describe() << " Qr " << qr;
      const kda::cuda_config::WsSmem small{{q, l.window, 2, 4, std::max(q, l.window - 2)}};
      if (qr > std::max(q, l.window - 2)) EXPECT_GT(ws.stage_size(), small.stage_size()) << key.describe();
    }
}

TEST(Plan, AutoPicksFromTheMeasuredThresholds) {
  // kda/heuristics.h: every kind Split up to 12 items; decode and append Split up to 66 items
  // (a split of at least two within one CTA per SM on 132 SMs), Wide from 67; verify
  // q = 1 Wide, per_token q > 1 WS, record / fused WS and at q >= 4 Wide from 192 items; Wide
  // wherever the layout forbids bulk copies or two WS ring stages do not fit. WS only in gate
  // mode 0: with the gate precomputed (mode 2) the same keys run Wide.
  const DeviceInfo d = gpu();
  LayerShape l = shape(32);
  l.stream_ok = true;
  l.window = 6;
  auto pick = [&](StepMode m, int B, int q, const LayerShape& ls) { return kda::plan_step({m, B, q}, pol(), ls, d).variant; };
  LayerShape l4 = l;
  l4.H = 4;
  for (StepMode m : {StepMode::kDecode, StepMode::kAppend}) {
    EXPECT_EQ(pick(m, 3, 1, l4), Variant::kSplit);   // 12 items
    EXPECT_EQ(pick(m, 4, 1, l4), Variant::kSplit);   // 16
    EXPECT_EQ(pick(m, 7, 1, l4), Variant::kSplit);   // 28
    EXPECT_EQ(pick(m, 1, 1, l), Variant::kSplit);    // 32
    EXPECT_EQ(pick(m, 2, 1, l), Variant::kSplit);    // 64
    EXPECT_EQ(pick(m, 17, 1, l4), Variant::kWide);   // 68
    EXPECT_EQ(pick(m, 3, 1, l), Variant::kWide);     // 96
    EXPECT_EQ(pick(m, 256, 1, l), Variant::kWide);
  }
  for (StepMode m : {StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
    for (int q : {1, 2, 4}) {
      EXPECT_EQ(pick(m, 3, q, l4), Variant::kSplit) << int(m) << " q " << q;  // 12 items
      EXPECT_EQ(pick(m, 4, q, l4), q == 1 ? Variant::kWide : Variant::kWS) << int(m) << " q " << q;  // 16
    }
  EXPECT_EQ(pick(StepMode::kPerToken, 1, 4, l), Variant::kWS);
  EXPECT_EQ(pick(StepMode::kPerToken, 256, 4, l), Variant::kWS);
  EXPECT_EQ(pick(StepMode::kPerToken, 256, 1, l), Variant::kWide);  // q = 1: Wide everywhere
  for (StepMode m : {StepMode::kRecord, StepMode::kFused}) {
    EXPECT_EQ(pick(m, 5, 4, l), Variant::kWS) << int(m);    // 160 items
    EXPECT_EQ(pick(m, 6, 4, l), Variant::kWide) << int(m);  // 192
    EXPECT_EQ(pick(m, 256, 2, l), Variant::kWS) << int(m);  // q = 2: WS at every size
    LayerShape l10 = l;
    l10.window = 10;  // W - 2 + q for q = 8
    EXPECT_EQ(pick(m, 5, 8, l10), Variant::kWS) << int(m);
    EXPECT_EQ(pick(m, 256, 8, l10), Variant::kWide) << int(m);
    EXPECT_EQ(pick(m, 8, 1, l), Variant::kWide) << int(m);   // q = 1
  }
  // gate mode 2 (no F_B in the step): Wide wherever mode 0 would run WS
  LayerShape l2 = l;
  l2.has_f_b = false;
  for (StepMode m : {StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
    for (int q : {2, 4})
      for (int B : {1, 5, 256}) {
        EXPECT_EQ(pick(m, B, q, l), B == 256 && q == 4 && m != StepMode::kPerToken ? Variant::kWide : Variant::kWS)
            << int(m) << " q " << q << " B " << B << ": mode 0";
        const Plan p2 = kda::plan_step({m, B, q}, pol(), l2, d);
        EXPECT_EQ(p2.gate_mode, GateMode::kPrecomputed);
        EXPECT_EQ(p2.variant, Variant::kWide) << int(m) << " q " << q << " B " << B << ": mode 2";
        EXPECT_EQ(kda::plan_step({m, B, q}, pol(Variant::kAuto, GateMode::kPrecomputed), l, d).variant, Variant::kWide);
        EXPECT_EQ(kda::plan_step({m, B, q}, pol(Variant::kWS, GateMode::kPrecomputed), l, d).variant, Variant::kWS)
            << "a forced 'ws' runs in mode 2";
      }
  EXPECT_EQ(kda::plan_step({StepMode::kPerToken, 3, 4}, pol(), [&] { LayerShape t = l2; t.H = 4; return t; }(), d).variant,
            Variant::kSplit) << "12 items: Split in mode 2 too";
  l.stream_ok = false;
  EXPECT_EQ(pick(StepMode::kDecode, 3, 1, l), Variant::kWide);
  EXPECT_EQ(pick(StepMode::kPerToken, 8, 4, l), Variant::kWide);
  // q = 16: two WS ring stages do not fit; auto takes Wide instead of failing
  l.stream_ok = true;
  l.window = 18;
  EXPECT_EQ(pick(StepMode::kPerToken, 64, 16, l), Variant::kWide);
  EXPECT_EQ(pick(StepMode::kFused, 64, 16, l), Variant::kWide);
}

TEST(Plan, ForcedVariantsHonoured) {
  const DeviceInfo d = gpu();
  for (StepMode m : kModes) {
    const int q = m == StepMode::kDecode || m == StepMode::kAppend ? 1 : 3;
    const Plan w = kda::plan_step({m, 1, q}, pol(Variant::kWide), shape(4), d);  // auto would split
    EXPECT_EQ(w.variant, Variant::kWide);
    EXPECT_EQ(w.split, 1);
    EXPECT_EQ(w.ctas, 4);
    const Plan s = kda::plan_step({m, 512, q}, pol(Variant::kSplit), shape(32), d);  // auto would go wide
    EXPECT_EQ(s.variant, Variant::kSplit);
    EXPECT_GE(s.split, 2);
    EXPECT_EQ(s.ctas, int64_t(512) * 32 * s.split);
    const Plan g = kda::plan_step({m, 2, q}, pol(Variant::kAuto, GateMode::kPrecomputed, 777), shape(4), d);
    EXPECT_EQ(g.gate_mode, GateMode::kPrecomputed);
    EXPECT_EQ(g.pitch, 777);
  }
}

TEST(Plan, InvalidForcingThrowsNamingTheKey) {
  const DeviceInfo d = gpu();
  const StepKey key{StepMode::kPerToken, 6, 4};
  auto expect_named = [&](const std::string& msg, const std::string& what) {
    EXPECT_THAT(msg, HasSubstr(key.describe()));
    EXPECT_THAT(msg, HasSubstr(what));
  };
  // kWS is refused here because the layer's caches do not allow 16-byte copies (stream_ok)
  for (Variant v : {Variant::kWS, Variant::kCpu})
    expect_named(invalid_message([&] { kda::plan_step(key, pol(v), shape(4), d); }), kda::variant_name(v));
  expect_named(invalid_message([&] { kda::plan_step(key, pol(Variant::kSplit), shape(4), gpu(false)); }), "split");
  expect_named(invalid_message([&] { kda::plan_step(key, pol(Variant::kAuto, GateMode::kShared), shape(4), d); }), "1 (shared)");
  expect_named(invalid_message([&] { kda::plan_step(key, pol(Variant::kAuto, GateMode::kPerItem), shape(4, false), d); }),
               "f_b_weight");
  expect_named(invalid_message([&] { kda::plan_step(key, pol(), shape(4, true, 3), d); }), "W = 3");
  expect_named(invalid_message([&] { kda::plan_step(key, pol(), shape(4), gpu(true, 1024)); }), "shared memory");
  for (int q : {0, 17}) {
    const StepKey k{StepMode::kRecord, 2, q};
    EXPECT_THAT(invalid_message([&] { kda::plan_step(k, pol(), shape(4), d); }), HasSubstr(k.describe()));
    EXPECT_THAT(invalid_message([&] { kda::plan_step(k, pol(), shape(4), cpu()); }), HasSubstr(k.describe()));
  }
  const StepKey dq{StepMode::kDecode, 2, 2};
  EXPECT_THAT(invalid_message([&] { kda::plan_step(dq, pol(), shape(4), d); }), HasSubstr(dq.describe()));
  const StepKey nb{StepMode::kDecode, -1, 1};
  EXPECT_THAT(invalid_message([&] { kda::plan_step(nb, pol(), shape(4), d); }), HasSubstr(nb.describe()));
}

TEST(Plan, NoClustersNeverSplits) {
  for (int B : {1, 4, 100}) {
    const Plan p = kda::plan_step({StepMode::kDecode, B, 1}, pol(), shape(2), gpu(false));
    EXPECT_NE(p.variant, Variant::kSplit);
    EXPECT_EQ(p.split, 1);
  }
}

TEST(Plan, GateModeResolutionOnTheGpu) {
  const DeviceInfo d = gpu();
  const StepKey key{StepMode::kDecode, 8, 1};
  EXPECT_EQ(kda::plan_step(key, pol(), shape(4), d).gate_mode, GateMode::kPerItem);
  EXPECT_EQ(kda::plan_step(key, pol(), shape(4, false), d).gate_mode, GateMode::kPrecomputed);
  EXPECT_EQ(kda::plan_step(key, pol(Variant::kAuto, GateMode::kPrecomputed), shape(4), d).gate_mode,
            GateMode::kPrecomputed);
  EXPECT_EQ(kda::plan_step(key, pol(Variant::kAuto, GateMode::kPerItem), shape(4), d).gate_mode, GateMode::kPerItem);
  EXPECT_THAT(kda::plan_step(key, pol(), shape(4), d).describe(), HasSubstr(key.describe()));
}

TEST(Plan, StreamCtas) {
  EXPECT_EQ(kda::stream_ctas(0, 132), 0);
  EXPECT_EQ(kda::stream_ctas(1, 132), 1);
  EXPECT_EQ(kda::stream_ctas(264, 132), 264);
  EXPECT_EQ(kda::stream_ctas(265, 132), 133);  // per = 2
  EXPECT_EQ(kda::stream_ctas(528, 132), 264);
  EXPECT_EQ(kda::stream_ctas(529, 132), 177);  // per = 3
  EXPECT_EQ(kda::stream_ctas(5, 0), 0);
  for (int sms : {1, 7, 132})
    for (int64_t items = 1; items <= 3000; items += 7) {
      const int64_t per = (items + 2 * sms - 1) / (2 * sms);
      const int64_t ctas = kda::stream_ctas(items, sms);
      EXPECT_EQ(ctas, (items + per - 1) / per) << items << " items on " << sms << " SMs";
      EXPECT_LE(ctas, 2 * int64_t(sms));
      EXPECT_GE(ctas * per, items);
      EXPECT_LT((ctas - 1) * per, items) << "an idle CTA";
    }
}

TEST(Plan, StreamLayout) {
  alignas(16) static uint16_t buf[64];
  const int H = 1;
  const int64_t C = 3 * H * K;
  auto ops = [&](bool ds, int64_t window, int64_t slot_stride, int64_t chan_stride = -1) {
    kda::StreamOperands o;
    o.conv_dim_first = ds;
    o.W = 4;
    o.conv_state = ds ? make_view(buf, DType::kBF16, {4, C, window}, {slot_stride, chan_stride < 0 ? window : chan_stride, 1})
                      : make_view(buf, DType::kBF16, {4, window, C}, {slot_stride, C, chan_stride < 0 ? 1 : chan_stride});
    o.state = make_view(buf, DType::kF32, {4, H, K, K});
    o.input_row_stride_bytes = 2 * 1024;
    o.out_row_stride_bytes = 2 * 128;
    return o;
  };
  auto l = kda::stream_layout(ops(true, 8, C * 8), 4);
  ASSERT_TRUE(l.has_value());
  EXPECT_TRUE(l->dim_first);
  EXPECT_EQ(l->window, 8);
  auto s = kda::stream_layout(ops(false, 6, C * 6), 4);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->dim_first);
  EXPECT_EQ(s->window, 6);
  EXPECT_FALSE(kda::stream_layout(ops(false, 5, C * 5), 4).has_value()) << "window < W - 2 + q";
  EXPECT_FALSE(kda::stream_layout(ops(true, 8, C * 8 + 1), 4).has_value()) << "slot stride not 16-byte aligned";
  EXPECT_FALSE(kda::stream_layout(ops(false, 6, C * 6, 2), 4).has_value()) << "SD channel stride != 1";
  auto o = ops(true, 8, C * 8);
  o.input_row_stride_bytes = 2 * 1001;
  EXPECT_FALSE(kda::stream_layout(o, 4).has_value()) << "input row stride";
  o = ops(true, 8, C * 8);
  o.out_row_stride_bytes = 2 * 129;
  EXPECT_FALSE(kda::stream_layout(o, 4).has_value()) << "out row stride";
  o = ops(true, 8, C * 8);
  o.conv_state.data = buf + 1;
  EXPECT_FALSE(kda::stream_layout(o, 4).has_value()) << "conv data pointer";
  o = ops(true, 8, C * 8);
  o.state.strides[0] = int64_t(H) * K * K + 1;
  EXPECT_FALSE(kda::stream_layout(o, 4).has_value()) << "state slot stride";
  o = ops(true, 8, C * 8);
  o.conv_state = TensorView{};
  EXPECT_FALSE(kda::stream_layout(o, 4).has_value());
}

TEST(Plan, DecodeConvWeight) {
  const int H = 2, W = 4;
  const int64_t D = int64_t(H) * K;
  std::vector<float> w(size_t(3 * D * W));
  std::vector<uint16_t> wb(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = float(i) * 0.25f - 100.f;
    wb[i] = bf(w[i]);
  }
  const auto f = kda::decode_conv_weight(make_view(w.data(), DType::kF32, {3 * D, 1, W}));
  const auto b = kda::decode_conv_weight(make_view(wb.data(), DType::kBF16, {3 * D, 1, W}));
  ASSERT_EQ(f.size(), size_t(3 * W * D));
  for (int s = 0; s < 3; ++s)
    for (int j = 0; j < W; ++j)
      for (int64_t c = 0; c < D; ++c) {
        const size_t o = size_t((s * W + j) * D + c), in = size_t((s * D + c) * W + j);
        ASSERT_EQ(f[o], w[in]) << s << " " << j << " " << c;
        ASSERT_EQ(b[o], float(unbf(wb[in])));
      }
  // a strided (non-contiguous) weight: every other channel of a [2·3D, 1, W] buffer
  std::vector<float> w2(size_t(2 * 3 * D * W));
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = float(i);
  const auto g = kda::decode_conv_weight(make_view(w2.data(), DType::kF32, {3 * D, 1, W}, {2 * W, W, 1}));
  for (int s = 0; s < 3; ++s)
    for (int j = 0; j < W; ++j)
      for (int64_t c = 0; c < D; ++c) ASSERT_EQ(g[size_t((s * W + j) * D + c)], w2[size_t((s * D + c) * 2 * W + j)]);
  // W = 2 (the CPU backend takes any W >= 2)
  const auto g2 = kda::decode_conv_weight(make_view(w.data(), DType::kF32, {3 * D, 1, 2}));
  EXPECT_EQ(g2.size(), size_t(3 * 2 * D));
  EXPECT_THAT(invalid_message([&] { kda::decode_conv_weight(make_view(w.data(), DType::kF32, {3 * D - 3, 1, W})); }),
              HasSubstr("conv_weight"));
  EXPECT_THAT(invalid_message([&] { kda::decode_conv_weight(make_view(w.data(), DType::kF16, {3 * D, 1, W})); }),
              HasSubstr("conv_weight"));
  EXPECT_THAT(invalid_message([&] { kda::decode_conv_weight(make_view(w.data(), DType::kF32, {3 * D, W})); }),
              HasSubstr("conv_weight"));
}

TEST(Plan, DeferredSupportedAndReplays) {
  static float st[4];
  const TensorView vk = make_view(st, DType::kF32, {8, 2, K, K});
  EXPECT_TRUE(kda::deferred_supported(vk, std::nullopt));
  EXPECT_TRUE(kda::deferred_supported(vk, -5.f));
  TensorView b = vk;
  b.dtype = DType::kBF16;
  EXPECT_TRUE(kda::deferred_supported(b, std::nullopt));
  TensorView kv = vk;
  kv.strides[2] = 1;
  kv.strides[3] = K;
  EXPECT_FALSE(kda::deferred_supported(kv, std::nullopt));
  TensorView h = vk;
  h.dtype = DType::kF16;
  EXPECT_FALSE(kda::deferred_supported(h, std::nullopt));
  EXPECT_FALSE(kda::deferred_supported(make_view(st, DType::kF32, {8, 2 * K, K}), std::nullopt));
  EXPECT_FALSE(kda::deferred_supported(TensorView{}, std::nullopt));
  for (int H : {1, 3, 96})
    for (int B : {0, 1, 1000})
      for (int q : {1, 16}) EXPECT_TRUE(kda::replays(H, B, q));
  EXPECT_FALSE(kda::replays(4, 1, 0));
  EXPECT_FALSE(kda::replays(4, 1, 17));
}

TEST(Plan, PreparedKdaPlansOnTheCpu) {
  Rng rng(3);
  LayerOpts lo;
  lo.H = 3;
  LayerData L = random_layer(rng, lo);
  const StepKey key{StepMode::kRecord, 4, 3};
  auto k = make_kda(L, false, 0, {{key, pol(Variant::kAuto, GateMode::kAuto, 999)}});
  PoolSpec ps;
  ps.H = 3;
  ps.window = 5;
  ps.nslots = 3;
  ps.rows_r = 3;
  ps.Qr = 3;
  ps.ds = false;
  PoolData p = make_pool(ps);
  Caches c = p.caches();
  k->prepare(c);
  const Plan& pl = k->plan_for(key, c);
  EXPECT_EQ(pl.variant, Variant::kCpu);
  EXPECT_EQ(pl.pitch, 999);
  EXPECT_TRUE(pl.key == key);
  const Plan& other = k->plan_for({StepMode::kDecode, 17, 1}, c);  // not a policy key: the default policy
  EXPECT_EQ(other.variant, Variant::kCpu);
  EXPECT_EQ(other.pitch, 0);
  EXPECT_EQ(k->device(), Device::kCPU);
  EXPECT_EQ(k->device_info().device, Device::kCPU);
  EXPECT_EQ(k->heads(), 3);
  EXPECT_EQ(k->taps(), 4);
}

}  // namespace
}  // namespace kt

namespace kt {
namespace {

TEST(Plan, NamesParseAndRoundTrip) {
  for (StepMode m : {StepMode::kDecode, StepMode::kAppend, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
    EXPECT_EQ(kda::parse_mode(kda::mode_name(m)), m);
  EXPECT_THROW(kda::parse_variant("stream"), std::invalid_argument);  // removed: Split/Wide beat it everywhere
  for (kda::Variant v : kda::kVariants) EXPECT_EQ(kda::parse_variant(kda::variant_name(v)), v);
  EXPECT_THROW(kda::parse_mode("prefill"), std::invalid_argument);
  EXPECT_THROW(kda::parse_variant("fastest"), std::invalid_argument);
  EXPECT_THROW(kda::parse_variant("fused"), kda::ArgumentError);  // the SPEC's Fused is every variant's fused mode
  EXPECT_EQ((StepKey{StepMode::kFused, 3, 4}.describe()), "(fused, B=3, q=4)");
  kda::Status s;
  EXPECT_EQ(s.describe(), "ok");
  s.flags = kda::kAccepted | kda::kPadStart;
  s.first_request = 2;
  EXPECT_THAT(s.describe(), ::testing::HasSubstr("ACCEPTED"));
  EXPECT_THAT(s.describe(), ::testing::HasSubstr("PAD_START"));
}

}  // namespace
}  // namespace kt
