// tests/cpp/test_append.cpp — the append step (SPEC §4 append, §8) on the CPU backend:
//   * n append steps then flush = n decode steps, bitwise (fp32 state: states, outputs,
//     windows) for n ∈ {1, Qr−1, Qr, Qr+1, 3·Qr+2}, both gates, both window layouts, gate
//     modes 0 and 2;
//   * every append step against the float64 reference (outputs, the record it writes, the
//     pending count, the write-back of a full row, untouched slots bitwise), fp32 and bf16
//     state, then a fused verify that folds what the append steps left, then append again;
//   * caller errors (pending > Qr, records row out of range) flagged with nothing written;
//   * a 200-step append trajectory against float64 (drift reported).
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "world.h"

namespace {

using namespace kt;
using kref::Mode;

constexpr int kQr = 4;

/// Two worlds with the same seed hold the same layer and pools.
void append_equals_decode(int n, bool lb, bool ds, bool gate2, uint64_t seed) {
  SCOPED_TRACE("n " + std::to_string(n) + (lb ? " lb" : " sp") + (ds ? " DS" : " SD") + (gate2 ? " gate2" : "") +
               seed_note(seed));
  const PoolSpec ps = pool_spec(2, 3, 9, kQr, ds);
  Policy pol;
  if (gate2) pol.gate_mode = kda::GateMode::kPrecomputed;
  World dec(seed, layer_opts(2, lb, true), ps, 0, pol), app(seed, layer_opts(2, lb, true), ps, 0, pol);
  ASSERT_EQ(dec.pool.state, app.pool.state);
  const std::vector<int64_t> slots = {3, 0, 7, 5};  // request 1 is a pad (the null slot)
  for (int64_t s : slots) app.set_pending(s, 0);
  Rng in_rng(seed + 17);
  InputOpts io;
  io.gate2 = gate2;
  for (int i = 0; i < n; ++i) {
    InputData in = random_inputs(in_rng, int(slots.size()), 2, io);
    OutBuf od = make_out(int(slots.size()), dec.L.D()), oa = make_out(int(slots.size()), app.L.D());
    StepSpec sd, sa;
    sd.ref = make_step(Mode::kDecode, 1, column(slots));
    sa.ref = make_step(Mode::kAppend, 1, column(slots));
    run_step(*dec.kda, dec.pool, in, od, sd);
    run_step(*app.kda, app.pool, in, oa, sa);
    ASSERT_EQ(od.mem, oa.mem) << "outputs of step " << i;
    ASSERT_EQ(dec.pool.conv, app.pool.conv) << "windows after step " << i;
    EXPECT_EQ(app.pool.pending[7], i % kQr + 1) << "pending after step " << i;
    EXPECT_EQ(app.pool.pending[0], 0) << "the pad's row is never touched";
  }
  EXPECT_TRUE(dec.kda->status().ok());
  EXPECT_TRUE(app.kda->status().ok());
  run_commit(*app.kda, app.pool, slots, {}, {}, 0);  // flush
  EXPECT_EQ(dec.pool.state, app.pool.state) << "state after flush";
  for (int64_t s : {3, 7, 5}) EXPECT_EQ(app.pool.pending[size_t(s)], 0);
}

TEST(Append, ThenFlushEqualsDecodeBitwise) {
  uint64_t seed = 900;
  for (int n : {1, kQr - 1, kQr, kQr + 1, 3 * kQr + 2})
    for (bool lb : {false, true})
      for (bool ds : {true, false}) append_equals_decode(n, lb, ds, /*gate2=*/(n + int(lb)) % 2 == 1, seed++);
}

/// append steps, a fused verify that folds what they left, append again: each step against
/// the float64 reference (World::step checks outputs, records, pending, untouched slots).
void append_trajectory(bool state_bf16, bool ds, uint64_t seed) {
  SCOPED_TRACE(std::string(state_bf16 ? "bf16" : "f32") + (ds ? " DS" : " SD") + seed_note(seed));
  PoolSpec ps = pool_spec(2, 2 + 4, 10, kQr, ds, state_bf16);
  World w(seed, layer_opts(2, seed % 2, true), ps);
  w.remirror = state_bf16;  // bf16: each step from the stored state (SPEC §9)
  const std::vector<int64_t> slots = {2, 0, 6};
  for (int64_t s : slots) w.set_pending(s, 0);
  double n = 0;
  for (int i = 0; i < kQr + 2; ++i) {  // includes a full row: fold, write back, new row
    const Measured m = w.step(make_step(Mode::kAppend, 1, column(slots)), ++n);
    EXPECT_LE(m.out, 1.0) << "append step " << i;
  }
  // a fused verify (q = 3, accepted = 2) folds whatever the append steps left pending
  Measured m = w.step(make_step(Mode::kFused, 3, column(slots), {2, 1, 2}), ++n);
  EXPECT_LE(m.out, 1.0) << "fused after append";
  // pending = accepted after sampling, then append continues from the folded checkpoint
  w.set_pending(2, 2);
  w.set_pending(6, 1);
  for (int i = 0; i < 3; ++i) {
    m = w.step(make_step(Mode::kAppend, 1, column(slots), {2, 1, 1}), ++n);
    EXPECT_LE(m.out, 1.0) << "append after fused, step " << i;
  }
  // explicit records rows
  w.set_pending(4, 0);
  w.set_pending(8, kQr);
  m = w.step(make_step(Mode::kAppend, 1, column(slots), {}, {}, {4, 0, 8}), ++n);
  EXPECT_LE(m.out, 1.0);
}

TEST(Append, StepsAgainstFloat64ThenFusedThenAppend) {
  uint64_t seed = 950;
  for (bool bf16 : {false, true})
    for (bool ds : {true, false}) append_trajectory(bf16, ds, seed++);
}

TEST(Append, CallerErrorsFlagNothingWritten) {
  PoolSpec ps = pool_spec(2, 3, 8, kQr);
  {
    World w(970, layer_opts(2), ps);
    w.set_pending(3, kQr + 1);  // pending above Qr
    w.set_pending(5, 0);
    const Measured m = w.step(make_step(Mode::kAppend, 1, column({5, 3})), 1);
    (void)m;
  }
  {
    World w(971, layer_opts(2), ps);
    w.set_pending(3, 0);
    // records row out of range for request 1, the null slot for request 0
    const Measured m = w.step(make_step(Mode::kAppend, 1, column({3, 5}), {}, {}, {0, 99}), 1);
    (void)m;
  }
}

TEST(Append, LongTrajectoryAgainstFloat64) {
  PoolSpec ps = pool_spec(2, 3, 6, 8);
  World w(980, layer_opts(2, true, true), ps);
  const std::vector<int64_t> slots = {1, 4};
  for (int64_t s : slots) w.set_pending(s, 0);
  double worst_out = 0, worst_state = 0;
  for (int i = 0; i < 200; ++i) {
    // chained: the error grows with n; the reference keeps its own float64 state
    const Measured m = w.step(make_step(Mode::kAppend, 1, column(slots)), std::min(24, i + 1));
    worst_out = std::max(worst_out, m.out);
    worst_state = std::max(worst_state, m.state);
  }
  w.fold(slots, {}, {}, 24);  // flush
  std::cout << "[ measured ] append trajectory (200 steps, Qr = 8): worst out ratio " << worst_out
            << ", worst state drift " << worst_state << " (pass <= 1e-3)\n";
  EXPECT_LE(worst_out, 1.0);
  EXPECT_LE(worst_state, 1e-3);
}

}  // namespace
