// The host layer's structure (issue: one plan, one validator): a step resolves its plan
// once and a new step key runs the planner once (its fallback included); every kind of
// host error arrives as its own kda::Error class naming the operand, what was expected and
// what came.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <utility>

#include "harness.h"
#include "plan/counters.h"
#include "scaffold.h"

namespace kt {
namespace {

using kda::Device;
using kda::DeviceInfo;
using kda::GateMode;
using kda::Plan;
using kda::Variant;
using ::testing::HasSubstr;

/// Planner calls and plan lookups made by `f`.
template <class F>
std::pair<int64_t, int64_t> count_plans(F&& f) {
  const int64_t calls = kda::counters::planner_calls, lookups = kda::counters::plan_lookups;
  f();
  return {kda::counters::planner_calls - calls, kda::counters::plan_lookups - lookups};
}

class HostLayer : public ::testing::Test, protected ValidScaffold {
 protected:
  HostLayer() : ValidScaffold(1515) {}
};

TEST_F(HostLayer, AStepPlansOnce) {
  // A fresh object with no policies: every key is planned on first use.
  kda = make_kda(L, true);
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(count_plans([&] { run(StepMode::kDecode); }), (P{1, 1})) << "first decode step: one planner call";
  EXPECT_EQ(count_plans([&] { run(StepMode::kDecode); }), (P{0, 1})) << "same key again: found, not planned";
  EXPECT_EQ(count_plans([&] { kda->run_views(in1.views(), out1.view(), pool.caches(), args(StepMode::kDecode)); }),
            (P{0, 1}))
      << "run_views of the same key shares its plan";
  for (StepMode m : {StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
    EXPECT_EQ(count_plans([&] { run(m); }), (P{1, 1})) << mode_name(m);
  EXPECT_EQ(count_plans([&] { kda->commit(pool.caches(), s1.view, rows.view, counts.view); }), (P{0, 0}));
  EXPECT_EQ(count_plans([&] { kda->flush(pool.caches(), s1.view, rows.view); }), (P{0, 0}));
  EXPECT_TRUE(kda->status().ok());
}

TEST_F(HostLayer, PrepareRunsThePlannerOncePerPolicyKeyAndStepsThenFindTheirPlans) {
  kda = make_kda(L, true, 0, {{{StepMode::kDecode, 2, 1}, {}}, {{StepMode::kFused, 2, 2}, {}}});
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(count_plans([&] { kda->prepare(pool.caches()); }), (P{2, 2}));
  EXPECT_EQ(count_plans([&] { run(StepMode::kDecode); }), (P{0, 1}));
  EXPECT_EQ(count_plans([&] { run(StepMode::kFused); }), (P{0, 1}));
}

TEST_F(HostLayer, ARefusedStepStillPlansAtMostOnce) {
  kda = make_kda(L, true);
  TensorView o = out1.view();
  o.dtype = DType::kF32;
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(count_plans([&] {
              EXPECT_THROW(kda->run(in1.projected(), o, pool.caches(), args(StepMode::kDecode)), kda::DTypeError);
            }),
            (P{1, 1}));
}

// ---- the plan carries its own fallback ---------------------------------------------------
DeviceInfo h200() {
  DeviceInfo d;
  d.device = Device::kCUDA;
  d.sms = 132;
  d.cc_major = 9;
  d.smem_optin = 232448;
  d.clusters = true;
  return d;
}

kda::LayerShape aligned_layer(int H) {
  kda::LayerShape l;
  l.H = H;
  l.window = 6;
  l.stream_ok = true;
  return l;
}

TEST(PlanFallback, BulkCopyVariantsCarryAWidePlanForUnalignedInputs) {
  for (Variant v : {Variant::kWS}) {
    Policy pol;
    pol.variant = v;
    pol.gate_mode = GateMode::kPrecomputed;
    pol.pitch = 4 * 128 * 4 + 4 * 128 + 8;
    const StepKey key{StepMode::kFused, 8, 4};
    Plan p;
    const auto calls = count_plans([&] { p = kda::plan_step(key, pol, aligned_layer(4), h200()); });
    EXPECT_EQ(calls.first, 1) << "the fallback is made inside the same planner call";
    EXPECT_EQ(p.variant, v);
    ASSERT_TRUE(p.needs_aligned_inputs);
    ASSERT_NE(p.fallback, nullptr);
    EXPECT_EQ(p.fallback->variant, Variant::kWide);
    EXPECT_EQ(p.fallback->gate_mode, p.gate_mode);
    EXPECT_EQ(p.fallback->pitch, p.pitch);
    EXPECT_EQ(p.fallback->key, key);
    EXPECT_FALSE(p.fallback->needs_aligned_inputs);
    EXPECT_THAT(p.describe(), HasSubstr("unaligned inputs: wide"));

    // for_inputs: aligned rows launch the plan itself, a misaligned row the fallback
    alignas(16) static uint16_t rows[2 * 4096];
    InputViews in;
    in.qkv = make_view(rows, DType::kBF16, {2, 1536}, {2048, 1});
    in.out_gate = make_view(rows + 1536, DType::kBF16, {2, 512}, {2048, 1});
    in.gate_in = make_view(rows + 1024, DType::kBF16, {2, 512}, {2048, 1});
    in.beta = make_view(rows + 1, DType::kBF16, {2, 4}, {2048, 1});  // beta is not bulk-copied
    EXPECT_EQ(&p.for_inputs(in), &p);
    in.gate_in.data = rows + 1025;
    EXPECT_EQ(&p.for_inputs(in), p.fallback.get());
    in.gate_in.data = rows + 1024;
    in.qkv.strides[0] = 2049;
    EXPECT_EQ(&p.for_inputs(in), p.fallback.get());
  }
}

TEST(PlanFallback, OtherPlansNeedNothingOfTheInputs) {
  for (Variant v : {Variant::kSplit, Variant::kWide}) {
    Policy pol;
    pol.variant = v;
    const Plan p = kda::plan_step({StepMode::kDecode, 8, 1}, pol, aligned_layer(4), h200());
    EXPECT_FALSE(p.needs_aligned_inputs);
    EXPECT_EQ(p.fallback, nullptr);
  }
  const Plan cpu = kda::plan_step({StepMode::kDecode, 8, 1}, {}, aligned_layer(4), DeviceInfo{});
  EXPECT_EQ(cpu.variant, Variant::kCpu);
  EXPECT_EQ(cpu.fallback, nullptr);
}

// ---- one test per typed error --------------------------------------------------------------
/// The error `f` throws, as E (fails the test when it throws something else or nothing).
template <class E, class F>
std::optional<E> caught(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw another type: " << e.what();
    return std::nullopt;
  }
  ADD_FAILURE() << "did not throw";
  return std::nullopt;
}

void expect_fields(const kda::Error& e, const std::string& operand, const std::string& expected,
                   const std::string& got) {
  EXPECT_EQ(e.operand(), operand);
  EXPECT_THAT(e.expected(), HasSubstr(expected));
  EXPECT_THAT(e.got(), HasSubstr(got));
  EXPECT_EQ(std::string(e.what()), e.operand() + ": expected " + e.expected() + ", got " + e.got());
  EXPECT_NE(dynamic_cast<const std::invalid_argument*>(&e), nullptr);
}

TEST_F(HostLayer, DTypeError) {
  TensorView o = out1.view();
  o.dtype = DType::kF32;
  auto e = caught<kda::DTypeError>([&] { kda->run(in1.projected(), o, pool.caches(), args(StepMode::kDecode)); });
  ASSERT_TRUE(e);
  expect_fields(*e, "out", "dtype bf16", "f32");
}

TEST_F(HostLayer, ShapeError) {
  Caches c = pool.caches();
  c.state.shape[1] = H + 1;
  auto e = caught<kda::ShapeError>([&] { run(StepMode::kDecode, args(StepMode::kDecode), c); });
  ASSERT_TRUE(e);
  expect_fields(*e, "state", "dimension 1 (H heads) = 2", "3");
}

TEST_F(HostLayer, LayoutError) {
  TensorView o = out1.view();
  o.strides[1] = 2;
  auto e = caught<kda::LayoutError>([&] { kda->run(in1.projected(), o, pool.caches(), args(StepMode::kDecode)); });
  ASSERT_TRUE(e);
  expect_fields(*e, "out", "unit inner stride", "strides");
}

TEST_F(HostLayer, DeviceError) {
  StepArgs a = args(StepMode::kDecode);
  a.slots.device = Device::kCUDA;  // never dereferenced: the device is checked first
  auto e = caught<kda::DeviceError>([&] { run(StepMode::kDecode, a); });
  ASSERT_TRUE(e);
  expect_fields(*e, "slots", "device cpu", "cuda:0");
}

TEST_F(HostLayer, ArgumentError) {
  StepArgs a = args(StepMode::kPerToken);
  a.q = 17;
  auto e = caught<kda::ArgumentError>([&] { run(StepMode::kPerToken, a); });
  ASSERT_TRUE(e);
  expect_fields(*e, "q", "tokens per request in [1, 16]", "17");
  auto m = caught<kda::ArgumentError>([] { kda::parse_mode("prefill"); });
  ASSERT_TRUE(m);
  expect_fields(*m, "mode", "one of decode, append, per_token, record, fused", "'prefill'");
  a = args(StepMode::kPerToken);
  a.out_slots = rows.view;
  auto o = caught<kda::ArgumentError>([&] { run(StepMode::kPerToken, a); });
  ASSERT_TRUE(o);
  expect_fields(*o, "out_slots", "none for per_token steps", "");
}

TEST_F(HostLayer, PlanError) {
  Policy split;
  split.variant = Variant::kSplit;
  kda = make_kda(L, true, 0, {{{StepMode::kDecode, 2, 1}, split}});
  auto e = caught<kda::PlanError>([&] { kda->prepare(pool.caches()); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->operand(), "policy for step (decode, B=2, q=1)");
  EXPECT_THAT(e->what(), HasSubstr("policy for step (decode, B=2, q=1): variant 'split' needs the CUDA backend"));
  EXPECT_NE(dynamic_cast<const kda::Error*>(&*e), nullptr);
}

}  // namespace
}  // namespace kt
