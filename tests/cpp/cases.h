// tests/cpp/cases.h — one randomised step case (any step kind and operand layout) run through
// kda::PreparedKda and checked against the float64 reference; used by the property tests.
#pragma once

#include <cmath>
#include <optional>
#include <sstream>
#include <string>

#include "api.h"
#include "check.h"
#include "data.h"

namespace kt {

enum class CaseKind { kDecode, kPerToken, kRecord, kFused, kCommit, kFlush };

inline const char* case_kind_name(CaseKind k) {
  switch (k) {
    case CaseKind::kDecode: return "decode";
    case CaseKind::kPerToken: return "per_token";
    case CaseKind::kRecord: return "record";
    case CaseKind::kFused: return "fused";
    case CaseKind::kCommit: return "commit";
    case CaseKind::kFlush: return "flush";
  }
  return "?";
}

struct Case {
  CaseKind kind = CaseKind::kDecode;
  int H = 2, q = 1, B = 3;
  bool lb = false, bias = false, ds = true, conv_f32 = false, state_bf16 = false;
  bool gate2 = false;        // gate mode 2 (policy kPrecomputed; D-wide gate_in)
  bool no_f_b = false;       // layer built without F_B (gate mode auto -> 2)
  bool views = false;        // run_views instead of the packed run
  int strided = 0;           // slot / index tensor layout: 0 dense, 1 table slice, 2 column-major, 3 every other column
  bool slots_2d = false;     // decode/record/fused slots as [B, 1]
  bool conv_w_bf16 = false;
  int64_t state_slot_extra = 0, conv_slot_extra = 0, rec_row_extra = 0;
  int64_t pitch_extra = 0, view_extra = 0, out_extra = 0;
  int window_extra = 0;      // window beyond W - 2 + q
  int slot_cols_extra = 0;   // per_token: slot row width beyond q
  bool out_slots = false;    // decode: out_slots given
  int acc_max = 1;           // accepted drawn from [1, acc_max] (1: accepted not passed)
  bool pad_request = false;  // one request is a pad
  bool pad_token = false;    // per_token: a pad id at some t > 0
  int pending_mode = 0;      // fused: 0 all zero, 1 all = accepted, 2 mixed
  bool record_rows = false;  // record/fused/commit/flush: explicit records rows
  int null_slot = 0;
  int Qr_extra = 0;
  bool pitch_in_policy = false;
  int W = 4;                 // conv taps (the CPU backend takes any W >= 2)
  double eps = 1e-5;         // RMSNorm epsilon
  double tiny_qk = 0;        // > 0: post-conv q and k of about this size per element (0: ordinary inputs)

  std::string describe() const {
    std::ostringstream os;
    os << case_kind_name(kind) << " H=" << H << " q=" << q << " B=" << B << (lb ? " lower_bound" : " softplus")
       << (bias ? " bias" : "") << (ds ? " DS" : " SD") << (conv_f32 ? " conv_f32" : " conv_bf16")
       << (state_bf16 ? " state_bf16" : " state_f32") << (gate2 ? " gate2" : "") << (no_f_b ? " no_f_b" : "")
       << (views ? " views" : " packed") << " slot_layout=" << strided << (slots_2d ? " slots2d" : "")
       << (conv_w_bf16 ? " conv_w_bf16" : "") << " state_extra=" << state_slot_extra
       << " conv_extra=" << conv_slot_extra << " pitch_extra=" << pitch_extra << " view_extra=" << view_extra
       << " out_extra=" << out_extra << " window_extra=" << window_extra << " slot_cols_extra=" << slot_cols_extra
       << (out_slots ? " out_slots" : "") << " acc_max=" << acc_max << (pad_request ? " pad_request" : "")
       << (pad_token ? " pad_token" : "") << " pending_mode=" << pending_mode
       << (record_rows ? " record_rows" : "") << " null_slot=" << null_slot << " Qr_extra=" << Qr_extra
       << " W=" << W << " eps=" << eps << " tiny_qk=" << tiny_qk;
    return os.str();
  }
};

/// Runs one case on fresh random data (seeded) and checks it against the reference.
inline Measured run_case(const Case& c, uint64_t seed) {
  SCOPED_TRACE(c.describe() + ", " + seed_note(seed));
  Rng rng(seed);
  LayerOpts lo;
  lo.H = c.H;
  lo.lower_bound = c.lb;
  lo.bias = c.bias;
  lo.conv_w_bf16 = c.conv_w_bf16;
  lo.has_f_b = !c.no_f_b;
  lo.W = c.W;
  lo.eps = c.eps;
  const double qk_scale = c.tiny_qk > 0 ? tiny_qk_scale(c.tiny_qk) : 1.0;
  lo.qk_scale = qk_scale;
  LayerData L = random_layer(rng, lo);
  const int q = c.q, B = c.B, H = c.H, D = H * K;
  const bool per_token = c.kind == CaseKind::kPerToken;
  const bool records = c.kind == CaseKind::kRecord || c.kind == CaseKind::kFused || c.kind == CaseKind::kCommit ||
                       c.kind == CaseKind::kFlush;
  const int cols = per_token ? q + c.slot_cols_extra : 1;
  const int window = c.W - 2 + q + c.window_extra;
  EXPECT_LE(c.acc_max, window - c.W + 2) << "case asks for accepted beyond the window";
  if (per_token) EXPECT_LE(c.acc_max, cols) << "case asks for accepted beyond the slot row";

  int64_t nslots = int64_t(B) * (per_token ? cols : (c.out_slots ? 2 : 1)) + 3;
  PoolSpec ps;
  ps.H = H;
  ps.W = c.W;
  ps.window = window;
  ps.nslots = nslots;
  ps.ds = c.ds;
  ps.conv_f32 = c.conv_f32;
  ps.state_bf16 = c.state_bf16;
  ps.conv_slot_extra = c.conv_slot_extra;
  ps.state_slot_extra = c.state_slot_extra;
  if (records) {
    ps.rows_r = c.record_rows ? B + 3 : nslots;
    ps.Qr = std::max(q, c.acc_max) + c.Qr_extra;
    ps.rec_row_extra = c.rec_row_extra;
    ps.with_pending = c.kind == CaseKind::kFused || c.kind == CaseKind::kFlush;
  }
  PoolData pool = make_pool(ps);
  pool.randomize(rng);
  if (qk_scale != 1.0) pool.scale_qk_windows(qk_scale);

  // ---- slots, accepted, pads -----------------------------------------------------------
  std::vector<int64_t> live = live_slots(rng, nslots, c.null_slot);
  size_t next = 0;
  kref::Step st;
  st.mode = c.kind == CaseKind::kDecode ? kref::Mode::kDecode
            : per_token                  ? kref::Mode::kPerToken
            : c.kind == CaseKind::kFused ? kref::Mode::kFused
                                         : kref::Mode::kRecord;
  st.q = q;
  st.null_slot = c.null_slot;
  st.precomputed_gate = c.gate2 || c.no_f_b;
  st.slots.assign(B, std::vector<int64_t>(cols));
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < cols; ++t) st.slots[b][t] = live[next++];
  if (c.acc_max > 1) {
    st.accepted.resize(B);
    for (int b = 0; b < B; ++b) st.accepted[b] = rng.integer(1, c.acc_max);
  }
  if (c.out_slots) {
    st.out_slots.resize(B);
    for (int b = 0; b < B; ++b) st.out_slots[b] = live[next++];
  }
  auto pad_id = [&]() -> int64_t {
    if (c.null_slot >= 0 && rng.coin()) return c.null_slot;
    return -rng.integer(1, 5);
  };
  int pad_b = -1;
  if (c.pad_request) {
    pad_b = int(rng.integer(0, B - 1));
    st.slots[pad_b][0] = pad_id();
  }
  if (c.pad_token && q > 1) {
    int b = int(rng.integer(0, B - 1));
    if (b == pad_b) b = (b + 1) % B;
    const int64_t acc = st.accepted.empty() ? 1 : st.accepted[b];
    int t = int(rng.integer(1, q - 1));
    if (t == acc - 1) t = t + 1 < q ? t + 1 : t - 1;
    if (t >= 1 && t != acc - 1) st.slots[b][t] = pad_id();
  }
  std::vector<int64_t> rows_of(B);
  if (records) {
    if (c.record_rows) {
      std::vector<int64_t> rr = live_slots(rng, ps.rows_r, c.null_slot);
      st.record_rows.assign(rr.begin(), rr.begin() + B);
      rows_of = st.record_rows;
    } else {
      for (int b = 0; b < B; ++b) rows_of[b] = st.slots[b][0];
    }
  }
  if (c.kind == CaseKind::kFused) {
    for (int b = 0; b < B; ++b) {
      if (b == pad_b) continue;
      const int64_t acc = st.accepted.empty() ? 1 : st.accepted[b];
      const bool full = c.pending_mode == 1 || (c.pending_mode == 2 && rng.coin());
      pool.pending[rows_of[b]] = full ? int32_t(acc) : 0;
    }
  }
  std::vector<int64_t> counts;
  if (c.kind == CaseKind::kCommit) {
    for (int b = 0; b < B; ++b) counts.push_back(rng.integer(0, ps.Qr));
  }
  if (c.kind == CaseKind::kFlush) {
    for (int b = 0; b < B; ++b)
      if (b != pad_b) pool.pending[rows_of[b]] = int32_t(rng.integer(0, ps.Qr));
  }

  // ---- inputs, the prepared object ---------------------------------------------------------
  InputOpts io;
  io.gate2 = c.gate2 || c.no_f_b;
  io.pitch_extra = c.pitch_extra;
  io.view_extra = c.view_extra;
  io.qk_scale = qk_scale;
  InputData in = random_inputs(rng, B * q, H, io);
  std::unordered_map<StepKey, Policy, kda::StepKeyHash> policies;
  if (c.kind != CaseKind::kCommit && c.kind != CaseKind::kFlush) {
    Policy pol;
    pol.gate_mode = c.gate2 ? kda::GateMode::kPrecomputed : (rng.coin() ? kda::GateMode::kAuto : kda::GateMode::kPerItem);
    if (c.no_f_b) pol.gate_mode = kda::GateMode::kAuto;
    if (c.pitch_in_policy && !c.views) pol.pitch = in.pitch;
    policies[StepKey{to_mode(st.mode), B, q}] = pol;
  }
  auto kda = make_kda(L, c.ds, c.null_slot, policies);
  {
    Caches cc = pool.caches();
    kda->prepare(cc);
  }
  const PoolData before = pool;
  kref::Pool rp = before.to_ref();
  const kref::Layer RL = L.ref();
  OutBuf out = make_out(B * q, D, c.out_extra);

  kref::Result res;
  if (c.kind == CaseKind::kCommit || c.kind == CaseKind::kFlush) {
    const std::vector<int64_t> cs = first_column(st.slots);
    run_commit(*kda, pool, cs, st.record_rows, counts, c.strided);
    res = kref::commit(RL, rp, cs, st.record_rows, counts, c.null_slot);
    return check_step(before, pool, rp, res, nullptr, q, 1.0, kda->status());
  }
  StepSpec sp;
  sp.ref = st;
  sp.strided = c.strided;
  sp.use_views = c.views;
  sp.slots_2d = c.slots_2d;
  run_step(*kda, pool, in, out, sp);
  res = kref::step(RL, rp, in.ref, st);
  const std::optional<Continued> cont = continued_from_stored(RL, before.to_ref(), pool, in.ref, st, res);
  const Measured m = check_step(before, pool, rp, res, &out, q, 1.0, kda->status(), cont ? &*cont : nullptr);
  if (c.tiny_qk > 0 && res.qk_sumsq_max > 0) {
    // the inputs reach the regime the class is for: post-conv q / k elements near tiny_qk
    const double lo = std::sqrt(res.qk_sumsq_min / K), hi = std::sqrt(res.qk_sumsq_max / K);
    EXPECT_GT(hi, c.tiny_qk / 5) << "post-conv q/k rms " << lo << " .. " << hi;
    EXPECT_LT(hi, c.tiny_qk * 5) << "post-conv q/k rms " << lo << " .. " << hi;
  }
  // the reference ran every non-pad request (property cases hold no caller errors)
  for (int b = 0; b < B; ++b)
    EXPECT_EQ(int(res.kind[b]), int(b == pad_b ? kref::Kind::kPad : kref::Kind::kRun)) << "request " << b;
  return m;
}

}  // namespace kt
