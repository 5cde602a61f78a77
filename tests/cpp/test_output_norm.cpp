// tests/cpp/test_output_norm.cpp — the layer without the output norm (SPEC §9,
// LayerWeights::output_norm = false) on the CPU backend:
//   * every step kind against the float64 reference (whose output is then o itself), packed
//     rows and separate views without out_gate, both window layouts, fp32 and bf16 state,
//     with every out-gate input NaN (a read of them would show in the output);
//   * what the norm must not change: a layer with and one without the output norm, on the same
//     data, write bitwise the same windows, states, records and pending, and different outputs;
//   * norm_weight given anyway (optional, unused), a reload without it, and the packed path
//     equal to the views without out_gate bitwise.
#include <gtest/gtest.h>

#include <cmath>

#include "world.h"

namespace {

using namespace kt;
using kref::Mode;

constexpr int kQr = 4;

LayerOpts no_norm(int H, bool lb, bool bias = true) {
  LayerOpts lo = layer_opts(H, lb, bias);
  lo.output_norm = false;
  return lo;
}

/// A step of each kind (q = 3 for the verify kinds) with pads, against float64; `n` counts
/// the chained steps.
void every_kind(World& w, const std::vector<int64_t>& slots, double& n, const char* what) {
  SCOPED_TRACE(what);
  for (int64_t s : slots)
    if (s > 0) w.set_pending(s, 0);
  Measured m = w.step(make_step(Mode::kDecode, 1, column(slots)), ++n);
  EXPECT_LE(m.out, 1.0) << "decode";
  m = w.step(make_step(Mode::kAppend, 1, column(slots)), ++n);
  EXPECT_LE(m.out, 1.0) << "append";
  m = w.step(make_step(Mode::kAppend, 1, column(slots)), ++n);
  EXPECT_LE(m.out, 1.0) << "append";
  m = w.step(make_step(Mode::kFused, 3, column(slots), {2, 1, 1, 2}), ++n);
  EXPECT_LE(m.out, 1.0) << "fused after append";
  m = w.step(make_step(Mode::kRecord, 3, column(slots), {1, 1, 2, 1}), ++n);
  EXPECT_LE(m.out, 1.0) << "record";
  std::vector<std::vector<int64_t>> pt;
  for (size_t b = 0; b < slots.size(); ++b)
    pt.push_back(slots[b] > 0 ? std::vector<int64_t>{slots[b], slots[b] + 1, slots[b] + 2}
                              : std::vector<int64_t>{slots[b], -1, -1});
  m = w.step(make_step(Mode::kPerToken, 3, pt, {1, 1, 1, 1}), ++n);
  EXPECT_LE(m.out, 1.0) << "per_token";
}

TEST(OutputNorm, WithoutEveryStepKindAgainstFloat64) {
  uint64_t seed = 1500;
  for (bool ds : {true, false})
    for (bool bf16 : {false, true})
      for (int how = 0; how < 3; ++how) {  // 0 packed, 1 views, 2 views without out_gate
        SCOPED_TRACE(std::string(ds ? "DS" : "SD") + (bf16 ? " bf16 state" : " f32 state") + " how " +
                     std::to_string(how) + " " + seed_note(seed));
        World w(seed++, no_norm(2, seed % 2 == 1), pool_spec(2, 2 + 3, 12, kQr, ds, bf16));
        w.remirror = bf16;
        w.poison_out_gate = true;
        w.use_views = how == 1;
        w.no_out_gate = how == 2;
        double n = 0;
        every_kind(w, {1, 0, 5, 9}, n, "no norm");
        w.fold({1, 5, 9}, {}, {}, ++n);  // flush what the last verify left (none: pending 0)
      }
}

/// out = o (SPEC §9): outputs of the order of the state, not of the RMSNorm (~ norm weight).
TEST(OutputNorm, WithoutOutputIsOTheNormChangesNothingElse) {
  const PoolSpec ps = pool_spec(3, 2 + 2, 9, kQr, false);
  LayerOpts with = layer_opts(3, true, true), without = no_norm(3, true);
  World a(1600, with, ps), b(1600, without, ps);
  ASSERT_EQ(a.pool.state, b.pool.state);
  const std::vector<int64_t> slots = {2, 0, 7};
  for (int64_t s : {2, 7}) {
    a.set_pending(s, 0);
    b.set_pending(s, 0);
  }
  Rng in_rng(1601);
  for (auto [mode, q] : std::vector<std::pair<Mode, int>>{
           {Mode::kDecode, 1}, {Mode::kAppend, 1}, {Mode::kFused, 2}, {Mode::kRecord, 2}, {Mode::kAppend, 1}}) {
    InputData in = random_inputs(in_rng, int(slots.size()) * q, 3);
    OutBuf oa = make_out(int(slots.size()) * q, a.L.D()), ob = make_out(int(slots.size()) * q, b.L.D());
    StepSpec sp;
    sp.ref = make_step(
        mode, q, column(slots),
        mode == Mode::kDecode || mode == Mode::kAppend ? std::vector<int64_t>{} : std::vector<int64_t>{2, 1, 1});
    run_step(*a.kda, a.pool, in, oa, sp);
    sp.no_out_gate = true;
    run_step(*b.kda, b.pool, in, ob, sp);
    const std::string m = kda::mode_name(to_mode(mode));
    EXPECT_EQ(a.pool.conv, b.pool.conv) << m << ": windows";
    EXPECT_EQ(a.pool.state, b.pool.state) << m << ": state";
    EXPECT_EQ(a.pool.corr, b.pool.corr) << m << ": records u";
    EXPECT_EQ(a.pool.kg, b.pool.kg) << m << ": records (k, g)";
    EXPECT_EQ(a.pool.pending, b.pool.pending) << m << ": pending";
    EXPECT_NE(oa.mem, ob.mem) << m << ": the outputs of the two layers should differ";
    // the normed rows have RMS about |norm_w|·sigmoid(gate) ~ 0.5; o is much smaller here
    double rms_a = 0, rms_b = 0;
    for (int c = 0; c < a.L.D(); ++c) {
      rms_a += std::pow(unbf(oa.at(0, c)), 2);
      rms_b += std::pow(unbf(ob.at(0, c)), 2);
    }
    EXPECT_GT(rms_a, 4 * rms_b) << m;
    for (int c = 0; c < a.L.D(); ++c) EXPECT_EQ(ob.at(1 * q, c), 0) << m << ": the pad's rows are zero";
  }
  EXPECT_TRUE(a.kda->status().ok());
  EXPECT_TRUE(b.kda->status().ok());
}

/// The packed row (its out_gate columns ignored) and views without out_gate, a norm weight
/// given or not: the same bits.
TEST(OutputNorm, WithoutPackedViewsAndNormWeightAgreeBitwise) {
  const PoolSpec ps = pool_spec(2, 3, 6, kQr);
  Rng rng(1700);
  LayerData L = random_layer(rng, no_norm(2, false));
  std::vector<PoolData> pools;
  std::vector<OutBuf> outs;
  InputData in = random_inputs(rng, 3, 2);
  for (int how = 0; how < 3; ++how) {
    LayerData l = L;
    l.norm_given = how == 2;
    if (how == 2)
      for (auto& x : l.norm_w) x = -x;  // given, but not used
    auto kda = make_kda(l, true);
    PoolData p = make_pool(ps);
    Rng prng(1701);
    p.randomize(prng);
    OutBuf o = make_out(3, L.D(), 2);
    StepSpec sp;
    sp.ref = make_step(Mode::kDecode, 1, column({1, 4, 0}));
    sp.no_out_gate = how == 1;
    run_step(*kda, p, in, o, sp);
    EXPECT_TRUE(kda->status().ok());
    pools.push_back(std::move(p));
    outs.push_back(std::move(o));
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(outs[0].mem, outs[i].mem) << "out, case " << i;
    EXPECT_EQ(pools[0].state, pools[i].state) << "state, case " << i;
    EXPECT_EQ(pools[0].conv, pools[i].conv) << "windows, case " << i;
  }
}

/// process_weights_after_loading of a layer without the output norm: no norm weight needed,
/// the new conv weights are used (checked against float64 with the new weights).
TEST(OutputNorm, WithoutReloadNeedsNoNormWeight) {
  World w(1800, no_norm(2, true), pool_spec(2, 3, 5));
  for (auto& x : w.L.conv_w) x *= -0.5f;  // in place: the views keep their addresses
  ASSERT_FALSE(w.L.weights().norm_weight.defined());
  EXPECT_NO_THROW(w.kda->process_weights_after_loading(w.L.weights()));
  w.RL = w.L.ref();
  const Measured m = w.step(make_step(Mode::kDecode, 1, column({1, 3})), 1);
  EXPECT_LE(m.out, 1.0);
}

}  // namespace
