// Host-side validation (SPEC §4, §5): every class of bad host input throws
// std::invalid_argument whose message names the operand (as a word: "state" does not match
// inside "conv_state"), and nothing is written before the throw (the pools and the poisoned
// out are compared bytewise).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <iostream>

#include "api.h"
#include "scaffold.h"

namespace kt {
namespace {

using ::testing::HasSubstr;

bool ident_char(char c) { return std::isalnum((unsigned char)c) || c == '_'; }

/// Does `msg` name `op` as a whole word (not inside a longer identifier)?
bool names(const std::string& msg, const std::string& op) {
  for (size_t p = msg.find(op); p != std::string::npos; p = msg.find(op, p + 1)) {
    const bool left = p == 0 || !ident_char(msg[p - 1]);
    const bool right = p + op.size() >= msg.size() || !ident_char(msg[p + op.size()]);
    if (left && right) return true;
  }
  return false;
}


constexpr int H = ValidScaffold::H, D = ValidScaffold::D, W = 4, WINDOW = ValidScaffold::WINDOW,
              NSLOTS = ValidScaffold::NSLOTS, QR = ValidScaffold::QR;

class Validation : public ::testing::Test, protected ValidScaffold {
 protected:
  Validation() : ValidScaffold(4242) {}
};

#define EXPECT_INVALID(stmt, operand)                                                               \
  do {                                                                                              \
    const auto snap_ = snapshot();                                                                  \
    const std::string msg_ = invalid_message([&] { stmt; });                                        \
    if (std::getenv("KDA_TEST_VERBOSE")) std::cout << "  [" << (operand) << "] " << msg_ << "\n";   \
    EXPECT_THAT(msg_, HasSubstr(operand)) << #stmt;                                                 \
    EXPECT_TRUE(names(msg_, operand)) << #stmt << ": the message does not name '" << (operand)    \
                                      << "' as a word: " << msg_;                                   \
    EXPECT_TRUE(unchanged(snap_)) << #stmt << " wrote before throwing";                             \
  } while (0)

TEST_F(Validation, BaselineRunsEveryMode) {
  for (StepMode m : {StepMode::kDecode, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
    EXPECT_NO_THROW(run(m)) << mode_name(m);
  EXPECT_NO_THROW(kda->commit(pool.caches(), s1.view, rows.view, counts.view));
  EXPECT_NO_THROW(kda->flush(pool.caches(), s1.view, rows.view));
  EXPECT_TRUE(kda->status().ok());
  EXPECT_TRUE(names("state: x", "state"));
  EXPECT_FALSE(names("conv_state: x", "state"));
}

// ---- dtype ------------------------------------------------------------------------------
TEST_F(Validation, WrongDtype) {
  const StepMode dec = StepMode::kDecode;
  {
    TensorView p = in1.projected();
    p.dtype = DType::kF16;
    EXPECT_INVALID(kda->run(p, out1.view(), pool.caches(), args(dec)), "projected");
  }
  {
    TensorView o = out1.view();
    o.dtype = DType::kF32;
    EXPECT_INVALID(kda->run(in1.projected(), o, pool.caches(), args(dec)), "out");
  }
  {
    Caches c = pool.caches();
    c.conv_state.dtype = DType::kF16;
    EXPECT_INVALID(run(dec, args(dec), c), "conv_state");
    c = pool.caches();
    c.state.dtype = DType::kF16;
    EXPECT_INVALID(run(dec, args(dec), c), "state");
    c = pool.caches();
    c.state.dtype = DType::kI32;
    EXPECT_INVALID(run(dec, args(dec), c), "state");
    c = pool.caches();
    c.correction.dtype = DType::kBF16;
    EXPECT_INVALID(run(StepMode::kRecord, args(StepMode::kRecord), c), "correction");
    c = pool.caches();
    c.key_gate.dtype = DType::kF64;
    EXPECT_INVALID(run(StepMode::kRecord, args(StepMode::kRecord), c), "key_gate");
    c = pool.caches();
    c.pending.dtype = DType::kI64;
    EXPECT_INVALID(run(StepMode::kFused, args(StepMode::kFused), c), "pending");
  }
  {
    StepArgs a = args(dec);
    a.slots.dtype = DType::kI64;
    EXPECT_INVALID(run(dec, a), "slots");
    a = args(dec);
    a.accepted = acc.view;
    a.accepted.dtype = DType::kI64;
    EXPECT_INVALID(run(dec, a), "accepted");
    a = args(dec);
    a.out_slots = rows.view;
    a.out_slots.dtype = DType::kF32;
    EXPECT_INVALID(run(dec, a), "out_slots");
    a = args(StepMode::kRecord);
    a.record_rows = rows.view;
    a.record_rows.dtype = DType::kI64;
    EXPECT_INVALID(run(StepMode::kRecord, a), "record_rows");
  }
  {
    TensorView c = counts.view;
    c.dtype = DType::kI64;
    EXPECT_INVALID(kda->commit(pool.caches(), s1.view, rows.view, c), "counts");
  }
  for (const char* name : {"qkv", "out_gate", "gate_in", "beta"}) {
    InputViews v = in1.views();
    TensorView* t = std::string(name) == "qkv" ? &v.qkv : std::string(name) == "out_gate" ? &v.out_gate
                                                      : std::string(name) == "gate_in" ? &v.gate_in : &v.beta;
    t->dtype = DType::kF32;
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), name);
  }
  // weights
  auto bad_weight = [&](auto edit, const char* name) {
    LayerWeights w = L.weights();
    edit(w);
    EXPECT_INVALID(PreparedKda(w, {}, true, 0), name);
  };
  bad_weight([](LayerWeights& w) { w.A_log.dtype = DType::kBF16; }, "A_log");
  bad_weight([](LayerWeights& w) { w.conv_weight.dtype = DType::kF16; }, "conv_weight");
  bad_weight([](LayerWeights& w) { w.f_b_weight.dtype = DType::kF32; }, "f_b_weight");
  bad_weight([](LayerWeights& w) { w.dt_bias.dtype = DType::kBF16; }, "dt_bias");
  bad_weight([](LayerWeights& w) { w.conv_bias.dtype = DType::kBF16; }, "conv_bias");
  bad_weight([](LayerWeights& w) { w.norm_weight.dtype = DType::kI32; }, "norm_weight");
}

// ---- rank -------------------------------------------------------------------------------
TEST_F(Validation, WrongRank) {
  const StepMode dec = StepMode::kDecode;
  {
    TensorView p = make_view(in1.proj.data(), DType::kBF16, {1, 2, in1.pitch});
    EXPECT_INVALID(kda->run(p, out1.view(), pool.caches(), args(dec)), "projected");
    TensorView o = make_view(out1.mem.data(), DType::kBF16, {2 * D});
    EXPECT_INVALID(kda->run(in1.projected(), o, pool.caches(), args(dec)), "out");
  }
  {
    Caches c = pool.caches();
    c.state = make_view(pool.state.data(), DType::kF32, {NSLOTS, H * K, K});
    EXPECT_INVALID(run(dec, args(dec), c), "state");
    c = pool.caches();
    c.conv_state = make_view(pool.conv.data(), DType::kBF16, {NSLOTS, 3, D, WINDOW});
    EXPECT_INVALID(run(dec, args(dec), c), "conv_state");
    c = pool.caches();
    c.correction = make_view(pool.corr.data(), DType::kF32, {NSLOTS, H * QR, K});
    EXPECT_INVALID(run(StepMode::kRecord, args(StepMode::kRecord), c), "correction");
    c = pool.caches();
    c.pending = make_view(pool.pending.data(), DType::kI32, {NSLOTS, 1});
    EXPECT_INVALID(run(StepMode::kFused, args(StepMode::kFused), c), "pending");
  }
  {
    StepArgs a = args(dec);
    a.slots = make_view(s2.mem.data(), DType::kI32, {2, 1, 1});
    EXPECT_INVALID(run(dec, a), "slots");
    a = args(StepMode::kPerToken);
    a.slots = s1.view;  // per_token with q = 2 needs [B, q]
    EXPECT_INVALID(run(StepMode::kPerToken, a), "slots");
    a = args(dec);
    a.accepted = make_view(acc.mem.data(), DType::kI32, {2, 1});
    EXPECT_INVALID(run(dec, a), "accepted");
  }
  {
    InputViews v = in1.views();
    v.qkv = make_view(in1.qkv.data(), DType::kBF16, {1, 2, 3 * D});
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "qkv");
    v = in1.views();
    v.beta = make_view(in1.be.data(), DType::kBF16, {2 * H});
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "beta");
  }
  auto bad_weight = [&](auto edit, const char* name) {
    LayerWeights w = L.weights();
    edit(w);
    EXPECT_INVALID(PreparedKda(w, {}, true, 0), name);
  };
  bad_weight([&](LayerWeights& w) { w.A_log = make_view(L.A_log.data(), DType::kF32, {1, H}); }, "A_log");
  bad_weight([&](LayerWeights& w) { w.conv_weight = make_view(L.conv_w.data(), DType::kF32, {3 * D, W}); }, "conv_weight");
  bad_weight([&](LayerWeights& w) { w.f_b_weight = make_view(L.f_b.data(), DType::kBF16, {D * R}); }, "f_b_weight");
  bad_weight([&](LayerWeights& w) { w.norm_weight = make_view(L.norm_w.data(), DType::kF32, {1, K}); }, "norm_weight");
}

// ---- shape ------------------------------------------------------------------------------
TEST_F(Validation, WrongShape) {
  const StepMode dec = StepMode::kDecode, pt = StepMode::kPerToken, rec = StepMode::kRecord;
  {
    Caches c = pool.caches();
    c.state.shape[1] = H + 1;
    EXPECT_INVALID(run(dec, args(dec), c), "state");
    c = pool.caches();
    c.state.shape[2] = 64;
    EXPECT_INVALID(run(dec, args(dec), c), "state");
    c = pool.caches();
    c.conv_state.shape[1] = 3 * D + 1;
    EXPECT_INVALID(run(dec, args(dec), c), "conv_state");
    c = pool.caches();
    c.key_gate.shape[0] = NSLOTS - 1;
    EXPECT_INVALID(run(rec, args(rec), c), "key_gate");
    c = pool.caches();
    c.key_gate.shape[3] = K;
    EXPECT_INVALID(run(rec, args(rec), c), "key_gate");
    c = pool.caches();
    c.correction.shape[3] = 64;
    EXPECT_INVALID(run(rec, args(rec), c), "correction");
    c = pool.caches();
    c.pending.shape[0] = NSLOTS + 1;
    EXPECT_INVALID(run(StepMode::kFused, args(StepMode::kFused), c), "pending");
  }
  {
    TensorView o = out1.view();
    o.shape[1] = D + 1;
    EXPECT_INVALID(kda->run(in1.projected(), o, pool.caches(), args(dec)), "out");
    o = out2.view();
    o.shape[0] = 3;
    EXPECT_INVALID(kda->run(in2.projected(), o, pool.caches(), args(pt)), "out");
  }
  {
    StepArgs a = args(dec);
    a.slots.shape[0] = 1;
    EXPECT_INVALID(run(dec, a), "slots");
    a = args(pt);
    a.slots.shape[1] = 1;  // per-token rows narrower than q
    EXPECT_INVALID(run(pt, a), "slots");
    a = args(dec);
    a.accepted = acc.view;
    a.accepted.shape[0] = 1;
    EXPECT_INVALID(run(dec, a), "accepted");
    a = args(dec);
    a.out_slots = rows.view;
    a.out_slots.shape[0] = 1;
    EXPECT_INVALID(run(dec, a), "out_slots");
    a = args(rec);
    a.record_rows = rows.view;
    a.record_rows.shape[0] = 1;
    EXPECT_INVALID(run(rec, a), "record_rows");
    TensorView cn = counts.view;
    cn.shape[0] = 1;
    EXPECT_INVALID(kda->commit(pool.caches(), s1.view, rows.view, cn), "counts");
  }
  {
    TensorView p = in2.projected();
    p.shape[0] = 3;  // rows not a multiple of q = 2
    TensorView o = out2.view();
    o.shape[0] = 3;
    EXPECT_INVALID(kda->run(p, o, pool.caches(), args(pt)), "inputs");
  }
  {
    InputViews v = in1.views();
    v.gate_in.shape[1] = R + 1;
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "gate_in");
    v = in1.views();
    v.beta.shape[1] = H + 1;
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "beta");
    v = in1.views();
    v.out_gate.shape[0] = 1;
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "out_gate");
    v = in1.views();
    v.qkv.shape[1] = 3 * D - 1;
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "qkv");
  }
  auto bad_weight = [&](auto edit, const char* name) {
    LayerWeights w = L.weights();
    edit(w);
    EXPECT_INVALID(PreparedKda(w, {}, true, 0), name);
  };
  bad_weight([](LayerWeights& w) { w.conv_weight.shape[1] = 2; }, "conv_weight");
  bad_weight([](LayerWeights& w) { w.conv_weight.shape[2] = 1; }, "conv_weight");  // W >= 2
  bad_weight([](LayerWeights& w) { w.norm_weight.shape[0] = 64; }, "norm_weight");
  bad_weight([](LayerWeights& w) { w.f_b_weight.shape[1] = 64; }, "f_b_weight");
  bad_weight([](LayerWeights& w) { w.A_log.shape[0] = 0; }, "A_log");
}

// ---- strides ----------------------------------------------------------------------------
TEST_F(Validation, WrongStrides) {
  const StepMode dec = StepMode::kDecode, rec = StepMode::kRecord;
  {
    Caches c = pool.caches();
    // a [K, V]-strided (transposed) state view: K not contiguous
    c.state.strides[2] = 1;
    c.state.strides[3] = K;
    const std::string msg = invalid_message([&] { run(dec, args(dec), c); });
    EXPECT_THAT(msg, HasSubstr("state"));
    EXPECT_TRUE(names(msg, "state")) << msg;
    c = pool.caches();
    c.state.strides[1] = int64_t(K) * K + 4;  // heads not dense
    EXPECT_INVALID(run(dec, args(dec), c), "state");
    c = pool.caches();
    c.state.strides[0] = int64_t(H) * K * K - 1;  // slot stride below H·V·K
    EXPECT_INVALID(run(dec, args(dec), c), "state");
    c = pool.caches();
    c.correction.strides[2] = K + 1;
    EXPECT_INVALID(run(rec, args(rec), c), "correction");
    c = pool.caches();
    c.key_gate.strides[1] = int64_t(QR) * 2 * K + 8;
    EXPECT_INVALID(run(rec, args(rec), c), "key_gate");
  }
  {
    TensorView o = out1.view();
    o.strides[0] = D - 1;
    EXPECT_INVALID(kda->run(in1.projected(), o, pool.caches(), args(dec)), "out");
    TensorView p = in1.projected();
    p.strides[0] = p.shape[1] - 1;
    EXPECT_INVALID(kda->run(p, out1.view(), pool.caches(), args(dec)), "projected");
    InputViews v = in1.views();
    v.qkv.strides[0] = -v.qkv.strides[0];
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "qkv");
  }
}

TEST_F(Validation, UnitInnerStrideViolations) {
  const StepMode dec = StepMode::kDecode;
  {
    TensorView p = make_view(in1.proj.data(), DType::kBF16, {2, in1.pitch / 2}, {in1.pitch, 2});
    EXPECT_INVALID(kda->run(p, out1.view(), pool.caches(), args(dec)), "projected");
    TensorView o = make_view(out1.mem.data(), DType::kBF16, {1, D}, {2 * D, 2});
    EXPECT_INVALID(kda->run(make_view(in1.proj.data(), DType::kBF16, {1, in1.pitch}), o, pool.caches(), args(dec)),
                   "out");
  }
  for (const char* name : {"qkv", "out_gate", "gate_in", "beta"}) {
    InputViews v = in1.views();
    TensorView* t = std::string(name) == "qkv" ? &v.qkv : std::string(name) == "out_gate" ? &v.out_gate
                                                      : std::string(name) == "gate_in" ? &v.gate_in : &v.beta;
    t->strides[1] = 2;
    EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), name);
  }
  auto bad_weight = [&](auto edit, const char* name) {
    LayerWeights w = L.weights();
    edit(w);
    EXPECT_INVALID(PreparedKda(w, {}, true, 0), name);
  };
  std::vector<float> big(size_t(2) * 3 * D, 0.f);
  std::vector<uint16_t> bigb(size_t(2) * D * R, 0);
  bad_weight([&](LayerWeights& w) { w.A_log = make_view(big.data(), DType::kF32, {H}, {2}); }, "A_log");
  bad_weight([&](LayerWeights& w) { w.dt_bias = make_view(big.data(), DType::kF32, {D}, {2}); }, "dt_bias");
  bad_weight([&](LayerWeights& w) { w.conv_bias = make_view(big.data(), DType::kF32, {3 * D}, {2}); }, "conv_bias");
  bad_weight([&](LayerWeights& w) { w.f_b_weight = make_view(bigb.data(), DType::kBF16, {D, R}, {2 * R, 2}); },
             "f_b_weight");
}

// ---- H·128 consistency ------------------------------------------------------------------
TEST_F(Validation, HeadCountConsistency) {
  auto bad_weight = [&](auto edit, const char* name) {
    LayerWeights w = L.weights();
    edit(w);
    EXPECT_INVALID(PreparedKda(w, {}, true, 0), name);
  };
  std::vector<float> big(size_t(4) * 3 * D * W, 0.f);
  std::vector<uint16_t> bigb(size_t(2) * D * R, 0);
  bad_weight([&](LayerWeights& w) { w.conv_weight = make_view(big.data(), DType::kF32, {3 * D + 3 * K, 1, W}); },
             "conv_weight");
  bad_weight([&](LayerWeights& w) { w.dt_bias = make_view(big.data(), DType::kF32, {D + K}); }, "dt_bias");
  bad_weight([&](LayerWeights& w) { w.f_b_weight = make_view(bigb.data(), DType::kBF16, {D - K, R}); }, "f_b_weight");
  bad_weight([&](LayerWeights& w) { w.conv_bias = make_view(big.data(), DType::kF32, {3 * D - 3}); }, "conv_bias");
  // the caches must agree with the layer's H
  Caches c = pool.caches();
  c.state.shape[1] = H - 1;
  EXPECT_INVALID(run(StepMode::kDecode, args(StepMode::kDecode), c), "state");
  // process_weights_after_loading: same H, same W, same optional weights
  {
    LayerOpts lo;
    lo.H = H + 1;
    LayerData other = random_layer(rng, lo);
    LayerWeights w = other.weights();
    EXPECT_INVALID(kda->process_weights_after_loading(w), "A_log");
    LayerWeights w2 = L.weights();
    w2.conv_weight.shape[2] = 3;
    EXPECT_INVALID(kda->process_weights_after_loading(w2), "conv_weight");
    LayerWeights w3 = L.weights();
    w3.conv_bias = TensorView{};
    EXPECT_INVALID(kda->process_weights_after_loading(w3), "weights");
    EXPECT_NO_THROW(kda->process_weights_after_loading(L.weights()));
  }
  // decode_conv_weight: 3D must be 3·128·H
  {
    TensorView w = make_view(big.data(), DType::kF32, {3 * 100, 1, W});
    EXPECT_THAT(invalid_message([&] { decode_conv_weight(w); }), HasSubstr("conv_weight"));
  }
}

// ---- window, q, modes -------------------------------------------------------------------
TEST_F(Validation, WindowTooSmallForQ) {
  // window 6 holds W - 2 + q for q <= 4: q = 5 must be refused
  InputData in = random_inputs(rng, 10, H);
  OutBuf o = make_out(10, D);
  Index sl = make_index_2d({{1, 2, 3, 4, 5}, {0, 0, 0, 0, 0}}, false);
  StepArgs a;
  a.mode = StepMode::kPerToken;
  a.q = 5;
  a.slots = sl.view;
  const auto snap = snapshot();
  EXPECT_THAT(invalid_message([&] { kda->run(in.projected(), o.view(), pool.caches(), a); }), HasSubstr("conv_state"));
  EXPECT_TRUE(unchanged(snap));
  // prepare with a policy key whose q does not fit the window
  auto k2 = std::make_unique<PreparedKda>(L.weights(),
                                          std::unordered_map<StepKey, Policy, kda::StepKeyHash>{
                                              {StepKey{StepMode::kRecord, 2, 5}, Policy{}}},
                                          true, 0);
  EXPECT_INVALID(k2->prepare(pool.caches()), "conv_state");
  // a window narrower than W - 1
  Caches c = pool.caches();
  c.conv_state.shape[2] = 2;
  EXPECT_INVALID(run(StepMode::kDecode, args(StepMode::kDecode), c), "conv_state");
  // Qr < q for a record step
  Caches c2 = pool.caches();
  c2.correction = make_view(pool.corr.data(), DType::kF32, {NSLOTS, H, 1, K}, {pool.corr_row, K, K, 1});
  c2.key_gate = make_view(pool.kg.data(), DType::kF32, {NSLOTS, H, 1, 2 * K}, {pool.kg_row, 2 * K, 2 * K, 1});
  const std::string qr_msg = invalid_message([&] { run(StepMode::kRecord, args(StepMode::kRecord), c2); });
  EXPECT_THAT(qr_msg, HasSubstr("correction"));
  EXPECT_THAT(qr_msg, HasSubstr("Qr"));
}

TEST_F(Validation, QOutsideOneToSixteen) {
  for (int q : {0, -1, 17}) {
    StepArgs a = args(StepMode::kPerToken);
    a.q = q;
    EXPECT_INVALID(run(StepMode::kPerToken, a), "q");
  }
  for (int q : {0, 17}) {
    auto make = [&] {
      PreparedKda k(L.weights(), {{StepKey{StepMode::kRecord, 2, q}, Policy{}}}, true, 0);
    };
    EXPECT_INVALID(make(), "policies");
  }
}

TEST_F(Validation, DecodeWithQOtherThanOne) {
  StepArgs a = args(StepMode::kDecode);
  a.q = 2;
  EXPECT_THAT(invalid_message([&] { kda->run(in2.projected(), out2.view(), pool.caches(), a); }), HasSubstr("q"));
  auto make = [&] { PreparedKda k(L.weights(), {{StepKey{StepMode::kDecode, 2, 2}, Policy{}}}, true, 0); };
  EXPECT_INVALID(make(), "policies");
}

TEST_F(Validation, OutSlotsOnlyInDecodeRecordRowsOnlyInRecordAndFused) {
  for (StepMode m : {StepMode::kPerToken, StepMode::kRecord, StepMode::kFused}) {
    StepArgs a = args(m);
    a.out_slots = rows.view;
    EXPECT_INVALID(run(m, a), "out_slots");
  }
  for (StepMode m : {StepMode::kDecode, StepMode::kPerToken}) {
    StepArgs a = args(m);
    a.record_rows = rows.view;
    EXPECT_INVALID(run(m, a), "record_rows");
  }
}

// ---- pitch ------------------------------------------------------------------------------
TEST_F(Validation, PitchSmallerThanTheRow) {
  const StepMode dec = StepMode::kDecode;
  TensorView p = in1.projected();
  p.shape[1] = 4 * D + R + H - 1;
  EXPECT_INVALID(kda->run(p, out1.view(), pool.caches(), args(dec)), "projected");
  // gate mode 2 needs 5D + H columns
  auto k2 = make_kda(L, true, 0, {}, Policy{0, kda::GateMode::kPrecomputed, kda::Variant::kAuto});
  TensorView p2 = in1.projected();  // 4D + R + H wide: too narrow for mode 2
  EXPECT_INVALID(k2->run(p2, out1.view(), pool.caches(), args(dec)), "projected");
}

TEST_F(Validation, PolicyPitchMismatch) {
  const StepMode dec = StepMode::kDecode;
  auto k2 = make_kda(L, true, 0, {{StepKey{dec, 2, 1}, Policy{in1.pitch + 8, kda::GateMode::kAuto, kda::Variant::kAuto}}});
  k2->prepare(pool.caches());
  const std::string msg = invalid_message([&] { k2->run(in1.projected(), out1.view(), pool.caches(), args(dec)); });
  EXPECT_THAT(msg, HasSubstr("projected"));
  EXPECT_THAT(msg, HasSubstr("pitch"));
  // the policy's pitch passes
  std::vector<uint16_t> wide(size_t(2) * (in1.pitch + 8), 0);
  for (int r = 0; r < 2; ++r)
    std::copy(in1.proj.begin() + r * in1.pitch, in1.proj.begin() + (r + 1) * in1.pitch, wide.begin() + r * (in1.pitch + 8));
  TensorView pw = make_view(wide.data(), DType::kBF16, {2, in1.pitch}, {in1.pitch + 8, 1});
  EXPECT_NO_THROW(k2->run(pw, out1.view(), pool.caches(), args(dec)));
}

// ---- records and pending ----------------------------------------------------------------
TEST_F(Validation, MissingRecordsForRecordMode) {
  for (StepMode m : {StepMode::kRecord, StepMode::kFused}) {
    Caches c = pool.caches();
    c.correction = TensorView{};
    EXPECT_INVALID(run(m, args(m), c), "correction");
    c = pool.caches();
    c.key_gate = TensorView{};
    EXPECT_INVALID(run(m, args(m), c), "key_gate");
  }
  Caches c = pool.caches();
  c.correction = TensorView{};
  EXPECT_INVALID(kda->commit(c, s1.view, rows.view, counts.view), "correction");
}

TEST_F(Validation, MissingPendingForFusedAndFlush) {
  Caches c = pool.caches();
  c.pending = TensorView{};
  EXPECT_INVALID(run(StepMode::kFused, args(StepMode::kFused), c), "pending");
  EXPECT_INVALID(kda->flush(c, s1.view, rows.view), "pending");
  EXPECT_INVALID(kda->commit(pool.caches(), s1.view, rows.view, TensorView{}), "counts");
  // a record step needs no pending
  EXPECT_NO_THROW(run(StepMode::kRecord, args(StepMode::kRecord), c));
}

// ---- missing operands, scalars, devices, forcing ----------------------------------------
TEST_F(Validation, MissingOperands) {
  const StepMode dec = StepMode::kDecode;
  StepArgs a = args(dec);
  a.slots = TensorView{};
  EXPECT_INVALID(run(dec, a), "slots");
  EXPECT_INVALID(kda->run(in1.projected(), TensorView{}, pool.caches(), args(dec)), "out");
  EXPECT_INVALID(kda->run(TensorView{}, out1.view(), pool.caches(), args(dec)), "projected");
  Caches c = pool.caches();
  c.state = TensorView{};
  EXPECT_INVALID(run(dec, args(dec), c), "state");
  c = pool.caches();
  c.conv_state = TensorView{};
  EXPECT_INVALID(run(dec, args(dec), c), "conv_state");
  InputViews v = in1.views();
  v.beta = TensorView{};
  EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "beta");
  for (int which = 0; which < 4; ++which) {
    LayerWeights w = L.weights();
    const char* name = which == 0 ? "A_log" : which == 1 ? "conv_weight" : which == 2 ? "dt_bias" : "norm_weight";
    (which == 0 ? w.A_log : which == 1 ? w.conv_weight : which == 2 ? w.dt_bias : w.norm_weight) = TensorView{};
    EXPECT_INVALID(PreparedKda(w, {}, true, 0), name);
  }
}

TEST_F(Validation, BadScalars) {
  for (float lb : {0.f, 0.5f, -5.5f}) {
    LayerWeights w = L.weights();
    w.lower_bound = lb;
    EXPECT_INVALID(PreparedKda(w, {}, true, 0), "lower_bound");
  }
  LayerWeights w = L.weights();
  w.lower_bound = -5.f;  // the edge is valid
  EXPECT_NO_THROW(PreparedKda(w, {}, true, 0));
  w = L.weights();
  w.eps = 0.f;
  EXPECT_INVALID(PreparedKda(w, {}, true, 0), "eps");
  EXPECT_INVALID(PreparedKda(L.weights(), {}, true, -2), "null_slot");
}

TEST_F(Validation, OperandsOnAnotherDeviceThanTheWeights) {
  const StepMode dec = StepMode::kDecode;
  // CPU weights, one operand tagged CUDA: refused on the host before anything is touched
  TensorView o = out1.view();
  o.device = kda::Device::kCUDA;
  EXPECT_INVALID(kda->run(in1.projected(), o, pool.caches(), args(dec)), "out");
  Caches c = pool.caches();
  c.state.device = kda::Device::kCUDA;
  EXPECT_INVALID(run(dec, args(dec), c), "state");
  StepArgs a = args(dec);
  a.slots.device = kda::Device::kCUDA;
  EXPECT_INVALID(run(dec, a), "slots");
  // the optional index tensors are named one by one
  a = args(dec);
  a.accepted = acc.view;
  a.accepted.device = kda::Device::kCUDA;
  EXPECT_INVALID(run(dec, a), "accepted");
  a = args(dec);
  a.out_slots = rows.view;
  a.out_slots.device = kda::Device::kCUDA;
  EXPECT_INVALID(run(dec, a), "out_slots");
  a = args(StepMode::kRecord);
  a.record_rows = rows.view;
  a.record_rows.device = kda::Device::kCUDA;
  EXPECT_INVALID(run(StepMode::kRecord, a), "record_rows");
  TensorView cn = counts.view;
  cn.device = kda::Device::kCUDA;
  EXPECT_INVALID(kda->commit(pool.caches(), s1.view, rows.view, cn), "counts");
  Caches c2 = pool.caches();
  c2.pending.device = kda::Device::kCUDA;
  EXPECT_INVALID(kda->flush(c2, s1.view, rows.view), "pending");
  InputViews v = in1.views();
  v.gate_in.device = kda::Device::kCUDA;
  EXPECT_INVALID(kda->run_views(v, out1.view(), pool.caches(), args(dec)), "gate_in");
  // weights split over devices
  LayerWeights w = L.weights();
  w.dt_bias.device = kda::Device::kCUDA;
  EXPECT_INVALID(PreparedKda(w, {}, true, 0), "dt_bias");
  w = L.weights();
  w.f_b_weight.device = kda::Device::kCUDA;
  EXPECT_INVALID(PreparedKda(w, {}, true, 0), "f_b_weight");
}

/// The layer's weights on the CPU, its caches tagged as CUDA memory (as a caller that moved the
/// caches to the GPU and forgot the weights): refused on the host, naming each cache and both
/// devices, before any byte is read. The tagged views point at host memory, so a check that
/// came too late would read it silently rather than fault: the pools are compared bytewise.
TEST_F(Validation, CpuWeightsWithCudaCachesRejected) {
  auto on_gpu = [](TensorView t, int id) {
    t.device = kda::Device::kCUDA;
    t.device_id = id;
    return t;
  };
  for (int id : {0, 1}) {
    SCOPED_TRACE("caches on cuda:" + std::to_string(id));
    const std::string want = "cuda:" + std::to_string(id);
    Caches all = pool.caches();
    all.conv_state = on_gpu(all.conv_state, id);
    all.state = on_gpu(all.state, id);
    all.correction = on_gpu(all.correction, id);
    all.key_gate = on_gpu(all.key_gate, id);
    all.pending = on_gpu(all.pending, id);
    EXPECT_INVALID(kda->prepare(all), "conv_state");
    EXPECT_THAT(invalid_message([&] { kda->prepare(all); }), HasSubstr("expected device cpu"));
    EXPECT_THAT(invalid_message([&] { kda->prepare(all); }), HasSubstr(want));
    for (StepMode m : {StepMode::kDecode, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
      EXPECT_INVALID(run(m, args(m), all), "conv_state");
    EXPECT_INVALID(kda->commit(all, s1.view, rows.view, counts.view), "conv_state");
    EXPECT_INVALID(kda->flush(all, s1.view, rows.view), "conv_state");
    // each cache alone on the GPU is named
    const struct {
      const char* name;
      TensorView Caches::*field;
    } one[] = {{"conv_state", &Caches::conv_state}, {"state", &Caches::state}, {"correction", &Caches::correction},
               {"key_gate", &Caches::key_gate}, {"pending", &Caches::pending}};
    for (const auto& o : one) {
      Caches c = pool.caches();
      c.*o.field = on_gpu(c.*o.field, id);
      const bool needs_records = o.field != &Caches::conv_state && o.field != &Caches::state;
      if (o.field == &Caches::pending) EXPECT_INVALID(run(StepMode::kFused, args(StepMode::kFused), c), o.name);
      else if (needs_records) EXPECT_INVALID(run(StepMode::kRecord, args(StepMode::kRecord), c), o.name);
      else EXPECT_INVALID(run(StepMode::kDecode, args(StepMode::kDecode), c), o.name);
    }
  }
  EXPECT_TRUE(kda->status().ok());
}

/// Weights split over two GPUs (tagged views; refused while validating the weights, before a
/// backend is created, so this runs without a GPU). The real two-device run — weights and caches
/// on a second GPU, and caches on another GPU than the weights — is
/// tests/cpp/test_cuda.cpp CudaVsCpu.TwoDevices (skipped unless two GPUs are visible).
TEST_F(Validation, WeightsSplitOverTwoGpusRejected) {
  LayerWeights w = L.weights();
  auto tag = [](TensorView& t, int id) {
    t.device = kda::Device::kCUDA;
    t.device_id = id;
  };
  tag(w.A_log, 1);
  tag(w.conv_weight, 1);
  tag(w.dt_bias, 1);
  tag(w.f_b_weight, 1);
  tag(w.conv_bias, 1);
  tag(w.norm_weight, 0);
  const std::string msg = invalid_message([&] { PreparedKda(w, {}, true, 0); });
  EXPECT_THAT(msg, HasSubstr("norm_weight"));
  EXPECT_THAT(msg, HasSubstr("cuda:1"));
  EXPECT_THAT(msg, HasSubstr("cuda:0"));
  tag(w.norm_weight, 1);
  tag(w.dt_bias, 0);
  EXPECT_THAT(invalid_message([&] { PreparedKda(w, {}, true, 0); }), HasSubstr("dt_bias"));
}

TEST_F(Validation, ForcedVariantOrGateTheCpuCannotRun) {
  const StepKey key{StepMode::kDecode, 2, 1};
  auto k = make_kda(L, true, 0, {{key, Policy{0, kda::GateMode::kAuto, kda::Variant::kSplit}}});
  const std::string msg = invalid_message([&] { k->prepare(pool.caches()); });
  EXPECT_THAT(msg, HasSubstr(key.describe()));
  EXPECT_THAT(msg, HasSubstr("split"));
  // gate mode 0 forced on a layer without F_B
  L.has_f_b = false;
  auto k2 = make_kda(L, true, 0, {{key, Policy{0, kda::GateMode::kPerItem, kda::Variant::kAuto}}});
  const std::string msg2 = invalid_message([&] { k2->prepare(pool.caches()); });
  EXPECT_THAT(msg2, HasSubstr("f_b_weight"));
  EXPECT_THAT(msg2, HasSubstr(key.describe()));
}

}  // namespace
}  // namespace kt
