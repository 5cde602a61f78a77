// The six golden cases of SPEC §10 (computed by flash-linear-attention) through the public
// kda::PreparedKda API: packed projection, DS windows as stored and SD windows by permuting,
// a pool of num_slots whose other slots hold sentinel bytes that must stay bitwise unchanged.
// Tolerances of SPEC §8: out |out − ref| <= 2^-8·|ref| + 2e-3·max|ref| (max over the step's
// rows); state max|err|/max|ref| <= 1e-5·n after n steps; windows bitwise. The measured
// ratios are printed ("[ golden ]" lines) and recorded as test properties.
//
// The float64 reference (reference.h) is run on the same cases too, which checks the
// reference itself against fla.
#include <gtest/gtest.h>

#include <iostream>

#include "golden.h"
#include "api.h"
#include "data.h"

namespace kt {
namespace {

const std::string kGoldenDir = KDA_GOLDEN_DIR;

struct GoldenRatios {
  double out_ratio = 0;  // max |err| / (2^-8|ref| + 2e-3·max|ref|)
  double out_rel = 0;    // max |err| / max |ref|
  double state_rel = 0;  // max |err| / max |ref| over the case's slots
};

LayerWeights golden_weights(golden::Case& gc) {
  LayerWeights w;
  const int64_t D = int64_t(gc.H) * K;
  w.conv_weight = make_view(gc.at("conv_weight").data(), DType::kF32, {3 * D, 1, gc.W});
  if (gc.has("conv_bias")) w.conv_bias = make_view(gc.at("conv_bias").data(), DType::kF32, {3 * D});
  w.f_b_weight = make_view(gc.at("f_b_weight").data(), DType::kBF16, {D, int64_t(R)});
  w.A_log = make_view(gc.at("A_log").data(), DType::kF32, {gc.H});
  w.dt_bias = make_view(gc.at("dt_bias").data(), DType::kF32, {D});
  w.norm_weight = make_view(gc.at("norm_weight").data(), DType::kF32, {K});
  w.eps = float(gc.eps);
  w.lower_bound = gc.lower_bound;
  return w;
}

kref::Layer golden_ref_layer(const golden::Case& gc) {
  kref::Layer L;
  L.H = gc.H;
  L.W = gc.W;
  const int64_t C = 3 * int64_t(gc.H) * K;
  const auto& cw = gc.at("conv_weight");
  L.conv_w.resize(size_t(C) * gc.W);
  for (int64_t i = 0; i < C * gc.W; ++i) L.conv_w[i] = cw.f32(i);
  if (gc.has("conv_bias"))
    for (int64_t i = 0; i < C; ++i) L.conv_b.push_back(gc.at("conv_bias").f32(i));
  const auto& fb = gc.at("f_b_weight");
  for (int64_t i = 0; i < fb.numel(); ++i) L.f_b.push_back(unbf(fb.bf16(i)));
  for (int h = 0; h < gc.H; ++h) L.A_log.push_back(gc.at("A_log").f32(h));
  for (int64_t i = 0; i < int64_t(gc.H) * K; ++i) L.dt_bias.push_back(gc.at("dt_bias").f32(i));
  for (int i = 0; i < K; ++i) L.norm_w.push_back(gc.at("norm_weight").f32(i));
  L.eps = double(float(gc.eps));
  L.has_lower_bound = gc.lower_bound.has_value();
  L.lower_bound = gc.lower_bound.value_or(0.f);
  return L;
}

/// The case's slot rows: [B][1] (decode) or [B][q] (verify, per-token semantics).
std::vector<std::vector<int64_t>> golden_slots(const golden::Case& gc) {
  const auto& s = gc.at("slots");
  const int64_t cols = s.shape.size() == 2 ? s.shape[1] : 1;
  std::vector<std::vector<int64_t>> out(gc.B, std::vector<int64_t>(cols));
  for (int b = 0; b < gc.B; ++b)
    for (int64_t t = 0; t < cols; ++t) out[b][t] = s.i32(b * cols + t);
  return out;
}

/// Out of one step vs the golden fp32 out; returns (ratio, rel).
std::pair<double, double> compare_out(const golden::Case& gc, int step, const std::vector<double>& got) {
  const int rows = gc.B * gc.q, D = gc.H * K;
  const auto& ref = gc.at("out");
  double M = 0;
  for (int i = 0; i < rows * D; ++i) M = std::max(M, std::fabs(double(ref.f32(int64_t(step) * rows * D + i))));
  double ratio = 0, E = 0;
  int reported = 0;
  for (int i = 0; i < rows * D; ++i) {
    const double r = ref.f32(int64_t(step) * rows * D + i);
    const double e = std::isfinite(got[i]) ? std::fabs(got[i] - r) : INFINITY;
    const double tol = std::ldexp(std::fabs(r), -8) + 2e-3 * M;
    E = std::max(E, e);
    ratio = std::max(ratio, e / tol);
    if (!(e <= tol) && reported++ < 5)
      ADD_FAILURE() << gc.name << " step " << step << " out[" << i / D << ", " << i % D << "] = " << got[i]
                    << ", golden " << r << " (tol " << tol << ")";
  }
  return {ratio, M > 0 ? E / M : E};
}

GoldenRatios run_library(golden::Case& gc, bool ds) {
  SCOPED_TRACE(gc.name + (ds ? " DS" : " SD"));
  GoldenRatios gr;
  const int H = gc.H, D = H * K, rows = gc.B * gc.q;
  const auto slots = golden_slots(gc);
  const bool verify = gc.at("slots").shape.size() == 2;
  const StepMode mode = verify ? StepMode::kPerToken : StepMode::kDecode;

  PreparedKda kda(golden_weights(gc), {{StepKey{mode, gc.B, gc.q}, Policy{gc.pitch, kda::GateMode::kAuto, kda::Variant::kAuto}}},
                  ds, /*null_slot=*/0);

  // pool: sentinel bytes everywhere, the case's rows at pool_slots
  PoolSpec ps;
  ps.H = H;
  ps.W = gc.W;
  ps.window = gc.window;
  ps.nslots = gc.num_slots;
  ps.ds = ds;
  PoolData pool = make_pool(ps);
  Rng rng(0x601de11 + gc.num_slots);
  for (auto& b : pool.conv) b = (unsigned char)rng.g();
  for (auto& b : pool.state) b = (unsigned char)rng.g();
  const auto& ps_t = gc.at("pool_slots");
  const int64_t n = ps_t.numel();
  const auto& cin = gc.at("conv_state_in");
  const auto& sin = gc.at("state_in");
  for (int64_t j = 0; j < n; ++j) {
    const int64_t s = ps_t.i32(j);
    for (int64_t c = 0; c < 3 * int64_t(D); ++c)
      for (int col = 0; col < gc.window; ++col)
        u16_put(pool.conv.data(), pool.conv_off(s, c, col), cin.bf16((j * 3 * D + c) * gc.window + col));
    for (int64_t i = 0; i < int64_t(H) * K * K; ++i)
      f32_put(pool.state.data(), pool.state_off(s, 0, 0, 0) + i, sin.f32(j * H * K * K + i));
  }
  const PoolData initial = pool;
  {
    Caches c = pool.caches();
    kda.prepare(c);
  }

  Index sl = verify ? make_index_2d(slots, false) : make_index_1d(first_column(slots), false);
  std::vector<int64_t> acc_v;
  Index acc;
  if (gc.has("accepted"))
    for (int b = 0; b < gc.B; ++b) acc_v.push_back(gc.at("accepted").i32(b));
  if (!acc_v.empty()) acc = make_index_1d(acc_v, false);
  auto& proj = gc.at("projected");
  for (int step = 0; step < gc.steps; ++step) {
    OutBuf out = make_out(rows, D);
    StepArgs a;
    a.slots = sl.view;
    a.q = gc.q;
    a.mode = mode;
    if (!acc_v.empty()) a.accepted = acc.view;
    TensorView pv = make_view(static_cast<uint16_t*>(proj.data()) + int64_t(step) * rows * gc.pitch, DType::kBF16,
                              {rows, gc.pitch});
    Caches c = pool.caches();
    kda.run(pv, out.view(), c, a);
    const kda::Status st = kda.status();
    EXPECT_TRUE(st.ok()) << st.describe();
    std::vector<double> got(size_t(rows) * D);
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < D; ++i) got[size_t(r) * D + i] = unbf(out.at(r, i));
    auto [ratio, rel] = compare_out(gc, step, got);
    gr.out_ratio = std::max(gr.out_ratio, ratio);
    gr.out_rel = std::max(gr.out_rel, rel);
  }

  // state and windows at the case's slots; everything else bitwise unchanged
  const auto& cout_t = gc.at("conv_state_out");
  const auto& sout = gc.at("state_out");
  double M = 0, E = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t s = ps_t.i32(j);
    for (int64_t i = 0; i < int64_t(H) * K * K; ++i) {
      const double r = sout.f32(j * H * K * K + i);
      const double g = f32_at(pool.state.data(), pool.state_off(s, 0, 0, 0) + i);
      M = std::max(M, std::fabs(r));
      E = std::max(E, std::isfinite(g) ? std::fabs(g - r) : INFINITY);
    }
    int bad = 0;
    for (int64_t c = 0; c < 3 * int64_t(D); ++c)
      for (int col = 0; col < gc.window; ++col) {
        const uint16_t want = cout_t.bf16((j * 3 * D + c) * gc.window + col);
        const uint16_t got = u16_at(pool.conv.data(), pool.conv_off(s, c, col));
        if (want != got && bad++ < 5)
          ADD_FAILURE() << "window of slot " << s << " channel " << c << " column " << col << ": 0x" << std::hex << got
                        << ", golden 0x" << want << std::dec;
      }
  }
  gr.state_rel = M > 0 ? E / M : E;
  EXPECT_LE(gr.state_rel, 1e-5 * gc.steps) << "state max|err|/max|ref| after " << gc.steps << " steps";
  // sentinel slots (and every byte outside the case's slots) unchanged
  std::vector<bool> is_case(size_t(gc.num_slots), false);
  for (int64_t j = 0; j < n; ++j) is_case[size_t(ps_t.i32(j))] = true;
  for (int64_t s = 0; s < gc.num_slots; ++s) {
    if (is_case[size_t(s)]) continue;
    const size_t so = size_t(pool.state_slot_stride) * 4 * size_t(s), sl_bytes = size_t(pool.state_slot_stride) * 4;
    EXPECT_EQ(0, std::memcmp(pool.state.data() + so, initial.state.data() + so, sl_bytes))
        << "state of sentinel slot " << s << " changed";
    const size_t co = size_t(pool.conv_slot_stride) * 2 * size_t(s), cl = size_t(pool.conv_slot_stride) * 2;
    EXPECT_EQ(0, std::memcmp(pool.conv.data() + co, initial.conv.data() + co, cl))
        << "window of sentinel slot " << s << " changed";
  }
  return gr;
}

GoldenRatios run_reference(golden::Case& gc) {
  SCOPED_TRACE(gc.name + " (float64 reference)");
  GoldenRatios gr;
  const int H = gc.H, D = H * K, rows = gc.B * gc.q;
  const kref::Layer L = golden_ref_layer(gc);
  kref::Pool P;
  P.H = H;
  P.W = gc.W;
  P.window = gc.window;
  P.conv_slots = P.state_slots = gc.num_slots;
  P.conv.assign(size_t(gc.num_slots) * 3 * D * gc.window, 0.0);
  P.state.assign(size_t(gc.num_slots) * H * K * K, 0.0);
  const auto& ps_t = gc.at("pool_slots");
  const int64_t n = ps_t.numel();
  for (int64_t j = 0; j < n; ++j) {
    const int64_t s = ps_t.i32(j);
    for (int64_t i = 0; i < 3 * int64_t(D) * gc.window; ++i)
      P.conv[size_t(s) * 3 * D * gc.window + i] = unbf(gc.at("conv_state_in").bf16(j * 3 * D * gc.window + i));
    for (int64_t i = 0; i < int64_t(H) * K * K; ++i)
      P.state[size_t(s) * H * K * K + i] = gc.at("state_in").f32(j * H * K * K + i);
  }
  kref::Step st;
  const bool verify = gc.at("slots").shape.size() == 2;
  st.mode = verify ? kref::Mode::kPerToken : kref::Mode::kDecode;
  st.q = gc.q;
  st.slots = golden_slots(gc);
  if (gc.has("accepted"))
    for (int b = 0; b < gc.B; ++b) st.accepted.push_back(gc.at("accepted").i32(b));
  const auto& proj = gc.at("projected");
  for (int step = 0; step < gc.steps; ++step) {
    std::vector<kref::Row> in(rows);
    for (int r = 0; r < rows; ++r) {
      const int64_t base = (int64_t(step) * rows + r) * gc.pitch;
      for (int c = 0; c < 3 * D; ++c) in[r].qkv.push_back(unbf(proj.bf16(base + c)));
      for (int c = 0; c < D; ++c) in[r].out_gate.push_back(unbf(proj.bf16(base + 3 * D + c)));
      for (int c = 0; c < R; ++c) in[r].gate_in.push_back(unbf(proj.bf16(base + 4 * D + c)));
      for (int h = 0; h < H; ++h) in[r].beta.push_back(unbf(proj.bf16(base + 4 * D + R + h)));
    }
    const kref::Result res = kref::step(L, P, in, st);
    EXPECT_EQ(res.flags, 0u);
    auto [ratio, rel] = compare_out(gc, step, res.out);
    gr.out_ratio = std::max(gr.out_ratio, ratio);
    gr.out_rel = std::max(gr.out_rel, rel);
  }
  double M = 0, E = 0;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t s = ps_t.i32(j);
    for (int64_t i = 0; i < int64_t(H) * K * K; ++i) {
      const double r = gc.at("state_out").f32(j * H * K * K + i);
      M = std::max(M, std::fabs(r));
      E = std::max(E, std::fabs(P.state[size_t(s) * H * K * K + i] - r));
    }
    for (int64_t i = 0; i < 3 * int64_t(D) * gc.window; ++i)
      EXPECT_EQ(P.conv[size_t(s) * 3 * D * gc.window + i], unbf(gc.at("conv_state_out").bf16(j * 3 * D * gc.window + i)))
          << "reference window of slot " << s << " element " << i;
  }
  gr.state_rel = M > 0 ? E / M : E;
  EXPECT_LE(gr.state_rel, 1e-5 * gc.steps);
  return gr;
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST(GoldenData, SixCasesPresent) {
  const auto cases = golden::list_cases(kGoldenDir);
  EXPECT_EQ(cases.size(), 6u) << "golden cases under " << kGoldenDir;
}

TEST_P(Golden, LibraryDSAndSD) {
  golden::Case gc = golden::load_case(kGoldenDir + "/" + GetParam());
  for (bool ds : {true, false}) {
    const GoldenRatios r = run_library(gc, ds);
    std::cout << "[ golden ] " << gc.name << (ds ? " DS" : " SD") << ": out max|err|/tol " << r.out_ratio
              << " (pass <= 1), out max|err|/max|ref| " << r.out_rel << ", state max|err|/max|ref| " << r.state_rel
              << " (pass <= " << 1e-5 * gc.steps << ")\n";
    RecordProperty(std::string(ds ? "DS" : "SD") + "_out_ratio", std::to_string(r.out_ratio));
    RecordProperty(std::string(ds ? "DS" : "SD") + "_state_rel", std::to_string(r.state_rel));
  }
}

TEST_P(Golden, Float64ReferenceAgreesWithFla) {
  golden::Case gc = golden::load_case(kGoldenDir + "/" + GetParam());
  const GoldenRatios r = run_reference(gc);
  std::cout << "[ golden ] " << gc.name << " float64 reference: out max|err|/tol " << r.out_ratio
            << ", state max|err|/max|ref| " << r.state_rel << "\n";
}

INSTANTIATE_TEST_SUITE_P(Cases, Golden,
                         ::testing::Values("decode_lowerbound_bias_h4_b2", "decode_lowerbound_h12_b2",
                                           "decode_softplus_h4_b3", "trajectory_decode_h2_b2_t16",
                                           "verify_q3_softplus_h2_b2", "verify_q4_lowerbound_h2_b3"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace kt
