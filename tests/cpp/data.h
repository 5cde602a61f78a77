// tests/cpp/data.h — the test data of the C++ suite: random numbers, random layers (any W,
// any RMSNorm epsilon), cache pools in any layout, dtype and stride (with their float64
// mirror), packed or separate input rows, poisoned output buffers and strided int32 index
// tensors. No checks and no calls into the library beyond building views.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kda/prepared.h"
#include "kda/types.h"
#include "reference.h"

namespace kt {

using kda::Caches;
using kda::DType;
using kda::InputViews;
using kda::LayerWeights;
using kda::Policy;
using kda::PreparedKda;
using kda::StepArgs;
using kda::StepKey;
using kda::StepMode;
using kda::TensorView;
using kda::make_view;
using kref::K;
using kref::R;

static_assert(uint32_t(kda::kSlotRange) == kref::kSlotRange && uint32_t(kda::kRowRange) == kref::kRowRange &&
              uint32_t(kda::kAccepted) == kref::kAccepted && uint32_t(kda::kPending) == kref::kPending &&
              uint32_t(kda::kPadStart) == kref::kPadStart);

// ---------------------------------------------------------------------------------------
// Random numbers
// ---------------------------------------------------------------------------------------
struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  double uniform(double a, double b) { return std::uniform_real_distribution<double>(a, b)(g); }
  double normal(double sd = 1.0) { return std::normal_distribution<double>(0.0, sd)(g); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
  bool coin(double p = 0.5) { return uniform(0.0, 1.0) < p; }
  uint16_t bits16() { return uint16_t(g()); }
  template <class T>
  void shuffle(std::vector<T>& v) { std::shuffle(v.begin(), v.end(), g); }
};

inline uint16_t bf(double x) { return kref::bf16_bits(x); }
inline double unbf(uint16_t b) { return kref::bf16_value(b); }
inline float f32_at(const unsigned char* base, int64_t i) {
  float f;
  std::memcpy(&f, base + i * 4, 4);
  return f;
}
inline void f32_put(unsigned char* base, int64_t i, float f) { std::memcpy(base + i * 4, &f, 4); }
inline uint16_t u16_at(const unsigned char* base, int64_t i) {
  uint16_t u;
  std::memcpy(&u, base + i * 2, 2);
  return u;
}
inline void u16_put(unsigned char* base, int64_t i, uint16_t u) { std::memcpy(base + i * 2, &u, 2); }

inline kda::StepMode to_mode(kref::Mode m) { return kda::StepMode(int(m)); }

// ---------------------------------------------------------------------------------------
// Layer weights
// ---------------------------------------------------------------------------------------
struct LayerData {
  int H = 1, W = 4;
  bool conv_w_bf16 = false;
  bool has_f_b = true;
  bool has_bias = false;
  std::vector<float> conv_w;        // [3D, 1, W] fp32
  std::vector<uint16_t> conv_w16;   // [3D, 1, W] bf16 (when conv_w_bf16)
  std::vector<float> conv_b;        // [3D]
  std::vector<uint16_t> f_b;        // [D, R] bf16
  std::vector<float> A_log, dt_bias, norm_w;
  float eps = 1e-5f;
  std::optional<float> lower_bound;
  bool output_norm = true;   ///< false: the layer without the output norm (SPEC §9)
  bool norm_given = true;    ///< without the output norm: pass norm_weight anyway (it is optional)
  int D() const { return H * K; }

  LayerWeights weights() {
    LayerWeights w;
    const int64_t C = 3 * int64_t(D());
    w.conv_weight = conv_w_bf16 ? make_view(conv_w16.data(), DType::kBF16, {C, 1, W})
                                : make_view(conv_w.data(), DType::kF32, {C, 1, W});
    if (has_bias) w.conv_bias = make_view(conv_b.data(), DType::kF32, {C});
    if (has_f_b) w.f_b_weight = make_view(f_b.data(), DType::kBF16, {int64_t(D()), int64_t(R)});
    w.A_log = make_view(A_log.data(), DType::kF32, {H});
    w.dt_bias = make_view(dt_bias.data(), DType::kF32, {int64_t(D())});
    if (output_norm || norm_given) w.norm_weight = make_view(norm_w.data(), DType::kF32, {K});
    w.eps = eps;
    w.lower_bound = lower_bound;
    w.output_norm = output_norm;
    return w;
  }

  kref::Layer ref() const {
    kref::Layer L;
    L.H = H;
    L.W = W;
    const size_t C = size_t(3) * D();
    L.conv_w.resize(C * W);
    for (size_t i = 0; i < C * W; ++i) L.conv_w[i] = conv_w_bf16 ? unbf(conv_w16[i]) : double(conv_w[i]);
    if (has_bias) L.conv_b.assign(conv_b.begin(), conv_b.end());
    if (has_f_b) {
      L.f_b.resize(f_b.size());
      for (size_t i = 0; i < f_b.size(); ++i) L.f_b[i] = unbf(f_b[i]);
    }
    L.A_log.assign(A_log.begin(), A_log.end());
    L.dt_bias.assign(dt_bias.begin(), dt_bias.end());
    L.norm_w.assign(norm_w.begin(), norm_w.end());
    L.eps = double(eps);
    L.has_lower_bound = lower_bound.has_value();
    L.lower_bound = lower_bound ? double(*lower_bound) : 0.0;
    L.output_norm = output_norm;
    return L;
  }
};

struct LayerOpts {
  int H = 1, W = 4;
  bool lower_bound = false;
  bool bias = false;
  bool conv_w_bf16 = false;
  bool has_f_b = true;
  double A_log_lo = -2.0, A_log_hi = 0.5;
  double dt_lo = -1.0, dt_hi = 1.0;
  double eps = 1e-5;       ///< RMSNorm epsilon
  double qk_scale = 1.0;   ///< multiplies the conv bias of the q and k channels (tiny_qk_scale)
  bool output_norm = true; ///< false: no output norm (SPEC §9); norm_weight then not passed
};

inline LayerData random_layer(Rng& rng, const LayerOpts& o) {
  LayerData L;
  L.H = o.H;
  L.W = o.W;
  L.conv_w_bf16 = o.conv_w_bf16;
  L.has_f_b = o.has_f_b;
  L.has_bias = o.bias;
  const int D = L.D();
  const size_t C = size_t(3) * D;
  L.conv_w.resize(C * o.W);
  L.conv_w16.resize(C * o.W);
  for (size_t i = 0; i < C * o.W; ++i) {
    L.conv_w[i] = float(rng.uniform(-0.6, 0.6));
    L.conv_w16[i] = bf(L.conv_w[i]);
  }
  L.conv_b.resize(C);
  for (size_t c = 0; c < C; ++c) L.conv_b[c] = float(rng.uniform(-0.3, 0.3) * (c < size_t(2) * D ? o.qk_scale : 1.0));
  L.f_b.resize(size_t(D) * R);
  for (auto& x : L.f_b) x = bf(rng.normal(1.0 / std::sqrt(double(R))));
  L.A_log.resize(o.H);
  for (auto& x : L.A_log) x = float(rng.uniform(o.A_log_lo, o.A_log_hi));
  L.dt_bias.resize(D);
  for (auto& x : L.dt_bias) x = float(rng.uniform(o.dt_lo, o.dt_hi));
  L.norm_w.resize(K);
  for (auto& x : L.norm_w) x = float(rng.uniform(0.5, 1.5));
  L.eps = float(o.eps);
  if (o.lower_bound) L.lower_bound = -float(rng.uniform(0.5, 5.0));
  L.output_norm = o.output_norm;
  L.norm_given = o.output_norm;
  return L;
}

// ---------------------------------------------------------------------------------------
// Cache pools
// ---------------------------------------------------------------------------------------
struct PoolSpec {
  int H = 1, W = 4, window = 3;
  int64_t nslots = 4;
  bool ds = true;           // conv_dim_first
  bool conv_f32 = false;
  bool state_bf16 = false;
  int64_t conv_slot_extra = 0;   // elements of padding per conv slot
  int64_t state_slot_extra = 0;  // elements of padding per state slot
  int64_t rows_r = 0;            // records rows (0: no records)
  int Qr = 0;
  int64_t rec_row_extra = 0;     // elements of padding per records row
  bool with_pending = false;
};

struct PoolData {
  PoolSpec sp;
  int64_t conv_slot_stride = 0, chan_stride = 0, col_stride = 0, state_slot_stride = 0;
  int64_t corr_row = 0, kg_row = 0;
  std::vector<unsigned char> conv, state;
  std::vector<float> corr, kg;
  std::vector<int32_t> pending;

  int D() const { return sp.H * K; }
  int64_t C() const { return 3 * int64_t(D()); }
  size_t conv_es() const { return sp.conv_f32 ? 4 : 2; }
  size_t state_es() const { return sp.state_bf16 ? 2 : 4; }
  int64_t conv_off(int64_t s, int64_t c, int64_t col) const {
    return s * conv_slot_stride + c * chan_stride + col * col_stride;
  }
  int64_t state_off(int64_t s, int h, int v, int k) const {
    return s * state_slot_stride + (int64_t(h) * K + v) * K + k;
  }
  double conv_get(int64_t s, int64_t c, int64_t col) const {
    const int64_t o = conv_off(s, c, col);
    return sp.conv_f32 ? double(f32_at(conv.data(), o)) : unbf(u16_at(conv.data(), o));
  }
  void conv_set(int64_t s, int64_t c, int64_t col, double v) {
    const int64_t o = conv_off(s, c, col);
    if (sp.conv_f32) f32_put(conv.data(), o, float(v));
    else u16_put(conv.data(), o, bf(v));
  }
  double state_get_off(int64_t o) const {
    return sp.state_bf16 ? unbf(u16_at(state.data(), o)) : double(f32_at(state.data(), o));
  }
  double state_get(int64_t s, int h, int v, int k) const { return state_get_off(state_off(s, h, v, k)); }
  void state_set(int64_t s, int h, int v, int k, double x) {
    const int64_t o = state_off(s, h, v, k);
    if (sp.state_bf16) u16_put(state.data(), o, bf(x));
    else f32_put(state.data(), o, float(x));
  }
  int64_t corr_off(int64_t row, int h, int t) const { return row * corr_row + (int64_t(h) * sp.Qr + t) * K; }
  int64_t kg_off(int64_t row, int h, int t) const { return row * kg_row + (int64_t(h) * sp.Qr + t) * 2 * K; }

  Caches caches() {
    Caches c;
    const int64_t n = sp.nslots, Cc = C(), w = sp.window;
    const DType cdt = sp.conv_f32 ? DType::kF32 : DType::kBF16;
    c.conv_state = sp.ds ? make_view(conv.data(), cdt, {n, Cc, w}, {conv_slot_stride, chan_stride, col_stride})
                         : make_view(conv.data(), cdt, {n, w, Cc}, {conv_slot_stride, col_stride, chan_stride});
    c.state = make_view(state.data(), sp.state_bf16 ? DType::kBF16 : DType::kF32, {n, sp.H, K, K},
                        {state_slot_stride, int64_t(K) * K, K, 1});
    if (sp.rows_r > 0) {
      c.correction = make_view(corr.data(), DType::kF32, {sp.rows_r, sp.H, sp.Qr, K},
                               {corr_row, int64_t(sp.Qr) * K, K, 1});
      c.key_gate = make_view(kg.data(), DType::kF32, {sp.rows_r, sp.H, sp.Qr, 2 * K},
                             {kg_row, int64_t(sp.Qr) * 2 * K, 2 * K, 1});
    }
    if (sp.with_pending) c.pending = make_view(pending.data(), DType::kI32, {sp.rows_r});
    return c;
  }

  /// Fills every byte (padding included) with random bits, then every logical element with
  /// finite random values: windows N(0,1) (bf16 values, or any fp32 value), states N(0, sd),
  /// records u N(0, 0.2), k unit vectors, g in [-2, 0].
  void randomize(Rng& rng, double state_sd = 0.3) {
    for (auto& b : conv) b = (unsigned char)rng.g();
    for (auto& b : state) b = (unsigned char)rng.g();
    for (int64_t s = 0; s < sp.nslots; ++s)
      for (int64_t c = 0; c < C(); ++c)
        for (int64_t col = 0; col < sp.window; ++col) conv_set(s, c, col, rng.normal());
    for (int64_t s = 0; s < sp.nslots; ++s)
      for (int h = 0; h < sp.H; ++h)
        for (int v = 0; v < K; ++v)
          for (int k = 0; k < K; ++k) state_set(s, h, v, k, rng.normal(state_sd));
    for (auto& x : corr) x = float(rng.normal(3.0));  // padding gets garbage too
    for (auto& x : kg) x = float(rng.normal(3.0));
    for (int64_t r = 0; r < sp.rows_r; ++r)
      for (int h = 0; h < sp.H; ++h)
        for (int t = 0; t < sp.Qr; ++t) {
          float* u = &corr[corr_off(r, h, t)];
          float* kk = &kg[kg_off(r, h, t)];
          double nrm = 0;
          for (int i = 0; i < K; ++i) {
            u[i] = float(rng.normal(0.2));
            kk[i] = float(rng.normal());
            nrm += double(kk[i]) * kk[i];
          }
          for (int i = 0; i < K; ++i) {
            kk[i] = float(kk[i] / std::sqrt(nrm));
            kk[K + i] = float(rng.uniform(-2.0, 0.0));
          }
        }
    for (auto& p : pending) p = 0;
  }

  /// Multiplies the q and k channels of every window by s (the extreme-input class).
  void scale_qk_windows(double s) {
    for (int64_t slot = 0; slot < sp.nslots; ++slot)
      for (int64_t c = 0; c < 2 * int64_t(D()); ++c)
        for (int64_t col = 0; col < sp.window; ++col) conv_set(slot, c, col, conv_get(slot, c, col) * s);
  }

  kref::Pool to_ref() const {
    kref::Pool P;
    P.H = sp.H;
    P.W = sp.W;
    P.window = sp.window;
    P.conv_slots = P.state_slots = sp.nslots;
    P.state_bf16 = sp.state_bf16;
    P.conv.resize(size_t(sp.nslots) * C() * sp.window);
    for (int64_t s = 0; s < sp.nslots; ++s)
      for (int64_t c = 0; c < C(); ++c)
        for (int64_t col = 0; col < sp.window; ++col) P.win(s, int(c), int(col)) = conv_get(s, c, col);
    P.state.resize(size_t(sp.nslots) * sp.H * K * K);
    for (int64_t s = 0; s < sp.nslots; ++s)
      for (int h = 0; h < sp.H; ++h) {
        double* d = P.st(s, h);
        const int64_t o = state_off(s, h, 0, 0);
        for (int i = 0; i < K * K; ++i) d[i] = state_get_off(o + i);
      }
    P.rows_r = sp.rows_r;
    P.Qr = sp.Qr;
    if (sp.rows_r > 0) {
      P.corr.resize(size_t(sp.rows_r) * sp.H * sp.Qr * K);
      P.kg.resize(size_t(sp.rows_r) * sp.H * sp.Qr * 2 * K);
      for (int64_t r = 0; r < sp.rows_r; ++r)
        for (int h = 0; h < sp.H; ++h)
          for (int t = 0; t < sp.Qr; ++t) {
            for (int i = 0; i < K; ++i) P.u_at(r, h, t)[i] = corr[corr_off(r, h, t) + i];
            for (int i = 0; i < 2 * K; ++i) P.kg_at(r, h, t)[i] = kg[kg_off(r, h, t) + i];
          }
      P.pending.assign(size_t(sp.rows_r), 0);
      for (int64_t r = 0; r < sp.rows_r && r < int64_t(pending.size()); ++r) P.pending[r] = pending[r];
    }
    return P;
  }
};

inline PoolData make_pool(const PoolSpec& sp) {
  PoolData p;
  p.sp = sp;
  const int64_t C = 3 * int64_t(sp.H) * K;
  if (sp.ds) {
    p.chan_stride = sp.window;
    p.col_stride = 1;
    p.conv_slot_stride = C * sp.window + sp.conv_slot_extra;
  } else {
    p.chan_stride = 1;
    p.col_stride = C;
    p.conv_slot_stride = C * sp.window + sp.conv_slot_extra;
  }
  p.state_slot_stride = int64_t(sp.H) * K * K + sp.state_slot_extra;
  p.conv.assign(size_t(p.conv_slot_stride * sp.nslots) * p.conv_es(), 0);
  p.state.assign(size_t(p.state_slot_stride * sp.nslots) * p.state_es(), 0);
  if (sp.rows_r > 0) {
    p.corr_row = int64_t(sp.H) * sp.Qr * K + sp.rec_row_extra;
    p.kg_row = int64_t(sp.H) * sp.Qr * 2 * K + sp.rec_row_extra;
    p.corr.assign(size_t(p.corr_row * sp.rows_r), 0.f);
    p.kg.assign(size_t(p.kg_row * sp.rows_r), 0.f);
    p.pending.assign(size_t(sp.rows_r), 0);
  }
  return p;
}

// ---------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------
struct InputOpts {
  bool gate2 = false;          // gate_in holds F_B·f_a + nothing else, D wide
  int64_t pitch_extra = 0;     // packed pitch beyond the minimum (garbage columns)
  int64_t view_extra = 0;      // separate views: row stride beyond their width (garbage)
  double qkv_sd = 1.0, gate_sd = 1.0, og_sd = 1.5, beta_sd = 2.0;
  double qk_scale = 1.0;  ///< multiplies the standard deviation of the q and k columns
  bool zero_q = false, zero_k = false;
};

struct InputData {
  int rows = 0, H = 0, D = 0, gate_cols = 0;
  int64_t pitch = 0;
  std::vector<uint16_t> proj;
  std::vector<uint16_t> qkv, og, gi, be;
  int64_t qkv_row = 0, og_row = 0, gi_row = 0, be_row = 0;
  std::vector<kref::Row> ref;

  TensorView projected() { return make_view(proj.data(), DType::kBF16, {rows, pitch}); }
  InputViews views() {
    InputViews v;
    v.qkv = make_view(qkv.data(), DType::kBF16, {rows, 3 * int64_t(D)}, {qkv_row, 1});
    v.out_gate = make_view(og.data(), DType::kBF16, {rows, int64_t(D)}, {og_row, 1});
    v.gate_in = make_view(gi.data(), DType::kBF16, {rows, int64_t(gate_cols)}, {gi_row, 1});
    v.beta = make_view(be.data(), DType::kBF16, {rows, int64_t(H)}, {be_row, 1});
    return v;
  }
};

/// Random inputs for `rows` rows; packed and separate copies hold the same values. Garbage
/// (random bits, NaN/Inf patterns included) fills every padding column.
inline InputData random_inputs(Rng& rng, int rows, int H, const InputOpts& o = {}) {
  InputData in;
  in.rows = rows;
  in.H = H;
  in.D = H * K;
  const int D = in.D;
  in.gate_cols = o.gate2 ? D : R;
  in.pitch = 4 * int64_t(D) + in.gate_cols + H + o.pitch_extra;
  in.proj.resize(size_t(std::max(rows, 1)) * in.pitch);
  for (auto& x : in.proj) x = rng.coin(0.2) ? uint16_t(rng.coin() ? 0x7fc1 : 0xff80) : rng.bits16();
  in.qkv_row = 3 * int64_t(D) + o.view_extra;
  in.og_row = D + o.view_extra;
  in.gi_row = in.gate_cols + o.view_extra;
  in.be_row = H + o.view_extra;
  auto garbage = [&](std::vector<uint16_t>& v, size_t n) {
    v.resize(std::max<size_t>(n, 1));
    for (auto& x : v) x = rng.coin(0.2) ? uint16_t(0x7fc1) : rng.bits16();
  };
  garbage(in.qkv, size_t(rows) * in.qkv_row);
  garbage(in.og, size_t(rows) * in.og_row);
  garbage(in.gi, size_t(rows) * in.gi_row);
  garbage(in.be, size_t(rows) * in.be_row);
  in.ref.resize(rows);
  for (int r = 0; r < rows; ++r) {
    kref::Row& row = in.ref[r];
    uint16_t* p = &in.proj[size_t(r) * in.pitch];
    row.qkv.resize(3 * D);
    for (int c = 0; c < 3 * D; ++c) {
      double x = rng.normal(o.qkv_sd * (c < 2 * D ? o.qk_scale : 1.0));
      if ((o.zero_q && c < D) || (o.zero_k && c >= D && c < 2 * D)) x = 0.0;
      p[c] = bf(x);
      in.qkv[size_t(r) * in.qkv_row + c] = p[c];
      row.qkv[c] = unbf(p[c]);
    }
    row.out_gate.resize(D);
    for (int c = 0; c < D; ++c) {
      p[3 * D + c] = bf(rng.normal(o.og_sd));
      in.og[size_t(r) * in.og_row + c] = p[3 * D + c];
      row.out_gate[c] = unbf(p[3 * D + c]);
    }
    row.gate_in.resize(in.gate_cols);
    for (int c = 0; c < in.gate_cols; ++c) {
      p[4 * D + c] = bf(rng.normal(o.gate_sd));
      in.gi[size_t(r) * in.gi_row + c] = p[4 * D + c];
      row.gate_in[c] = unbf(p[4 * D + c]);
    }
    row.beta.resize(H);
    for (int h = 0; h < H; ++h) {
      p[4 * D + in.gate_cols + h] = bf(rng.normal(o.beta_sd));
      in.be[size_t(r) * in.be_row + h] = p[4 * D + in.gate_cols + h];
      row.beta[h] = unbf(p[4 * D + in.gate_cols + h]);
    }
  }
  return in;
}

/// Writes a value into both copies of one input element (packed column `col` of row r).
inline void set_input(InputData& in, int r, int col, double x) {
  const uint16_t b = bf(x);
  const int D = in.D;
  in.proj[size_t(r) * in.pitch + col] = b;
  if (col < 3 * D) {
    in.qkv[size_t(r) * in.qkv_row + col] = b;
    in.ref[r].qkv[col] = unbf(b);
  } else if (col < 4 * D) {
    in.og[size_t(r) * in.og_row + col - 3 * D] = b;
    in.ref[r].out_gate[col - 3 * D] = unbf(b);
  } else if (col < 4 * D + in.gate_cols) {
    in.gi[size_t(r) * in.gi_row + col - 4 * D] = b;
    in.ref[r].gate_in[col - 4 * D] = unbf(b);
  } else {
    in.be[size_t(r) * in.be_row + col - 4 * D - in.gate_cols] = b;
    in.ref[r].beta[col - 4 * D - in.gate_cols] = unbf(b);
  }
}

// ---------------------------------------------------------------------------------------
// Output buffer (poisoned) and int32 index tensors (optionally a slice of a wider table)
// ---------------------------------------------------------------------------------------
inline constexpr uint16_t kPoison = 0xdead;

struct OutBuf {
  int rows = 0, D = 0;
  int64_t row = 0;
  std::vector<uint16_t> mem;
  TensorView view() { return make_view(mem.data(), DType::kBF16, {rows, int64_t(D)}, {row, 1}); }
  uint16_t at(int r, int c) const { return mem[size_t(r) * row + c]; }
};

inline OutBuf make_out(int rows, int D, int64_t extra = 0) {
  OutBuf o;
  o.rows = rows;
  o.D = D;
  o.row = D + extra;
  o.mem.assign(size_t(std::max(rows, 1)) * o.row, kPoison);
  return o;
}

struct Index {
  std::vector<int32_t> mem;
  TensorView view;
};

/// [B, cols] int32 in one of four layouts (`layout`, or `strided` from older call sites):
///   0 dense; 1 a column slice of a wider block table (row stride cols + 5, first column 2);
///   2 column-major (strides (1, B + 3)); 3 every other column (strides (2·cols + 1, 2)).
/// The elements outside the view hold garbage ids (977: out of any test pool).
inline Index make_index_2d(const std::vector<std::vector<int64_t>>& rows, int layout) {
  Index ix;
  const int64_t B = int64_t(rows.size());
  const int64_t cols = B ? int64_t(rows[0].size()) : 1;
  int64_t s0 = cols, s1 = 1, off = 0, n = std::max<int64_t>(B, 1) * cols;
  switch (layout) {
    case 1: s0 = cols + 5; off = 2; n = std::max<int64_t>(B, 1) * s0; break;
    case 2: s0 = 1; s1 = B + 3; off = 1; n = cols * s1 + 1; break;
    case 3: s0 = 2 * cols + 1; s1 = 2; off = 1; n = std::max<int64_t>(B, 1) * s0; break;
    default: break;
  }
  ix.mem.assign(size_t(n), 977);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < cols; ++t) ix.mem[size_t(off + b * s0 + t * s1)] = int32_t(rows[b][t]);
  ix.view = make_view(ix.mem.data() + off, DType::kI32, {B, cols}, {s0, s1});
  return ix;
}

/// [B] int32: 0 dense; 1 column 1 of a [B, 3] table; 2 stride 2; 3 stride 5 from element 4.
inline Index make_index_1d(const std::vector<int64_t>& v, int layout) {
  Index ix;
  const int64_t B = int64_t(v.size());
  const int64_t st = layout == 1 ? 3 : layout == 2 ? 2 : layout == 3 ? 5 : 1;
  const int64_t off = layout == 1 ? 1 : layout == 3 ? 4 : 0;
  ix.mem.assign(size_t(std::max<int64_t>(B, 1) * st + off + 1), -977);
  for (int64_t b = 0; b < B; ++b) ix.mem[size_t(off + b * st)] = int32_t(v[b]);
  ix.view = make_view(ix.mem.data() + off, DType::kI32, {B}, {st});
  return ix;
}

/// Distinct live slot ids in [0, nslots), excluding the null slot, shuffled.
inline std::vector<int64_t> live_slots(Rng& rng, int64_t nslots, int64_t null_slot) {
  std::vector<int64_t> v;
  for (int64_t s = 0; s < nslots; ++s)
    if (s != null_slot) v.push_back(s);
  rng.shuffle(v);
  return v;
}

inline std::string seed_note(uint64_t seed) {
  std::ostringstream os;
  os << "seed " << seed;
  return os.str();
}

/// A pool spec; with records (rows_r = nslots, Qr, pending) when Qr > 0.
inline PoolSpec pool_spec(int H, int window, int64_t nslots, int Qr = 0, bool ds = true, bool state_bf16 = false) {
  PoolSpec ps;
  ps.H = H;
  ps.window = window;
  ps.nslots = nslots;
  ps.ds = ds;
  ps.state_bf16 = state_bf16;
  if (Qr > 0) {
    ps.rows_r = nslots;
    ps.Qr = Qr;
    ps.with_pending = true;
  }
  return ps;
}

// ---------------------------------------------------------------------------------------
// What the contract lets vary: the RMSNorm epsilon, the conv width (CPU backend: any W >= 2),
// and inputs whose post-conv q and k are tiny (the l2 norm's epsilon then matters)
// ---------------------------------------------------------------------------------------
/// An RMSNorm epsilon, log-uniform in [1e-6, 1e-2].
inline double draw_eps(Rng& rng) { return std::pow(10.0, rng.uniform(-6.0, -2.0)); }
/// A conv width from {2, 3, 4, 5}.
inline int draw_taps(Rng& rng) { return int(rng.integer(2, 5)); }
/// The scale of the pre-conv q / k inputs, windows and conv bias that gives post-conv q and k
/// of about `post_conv` per element: with conv taps U(-0.6, 0.6) and bias U(-0.3, 0.3) the conv
/// output has a standard deviation of about 0.7·s for W = 4 (0.5·s to 0.8·s for W = 2..5), and
/// SiLU(a) ≈ a / 2 near 0.
inline double tiny_qk_scale(double post_conv) { return 2.8 * post_conv; }

/// Layer options: H heads, lower-bound gate or softplus, conv bias or none.
inline LayerOpts layer_opts(int H, bool lb = false, bool bias = true) {
  LayerOpts lo;
  lo.H = H;
  lo.lower_bound = lb;
  lo.bias = bias;
  return lo;
}

/// The message of the std::invalid_argument that f() throws, or a marker when it throws

}  // namespace kt
