// tests/cpp/reference.h — an independent float64 evaluation of SPEC §3 / §4, written from the
// SPEC text alone. It shares no code with the backends (no kda/ header is included here): its
// own bf16 conversions, its own request resolution (pads, null slot, caller errors), its own
// conv window rule, gate, l2 norm, delta rule, gated RMSNorm, records and commit/flush folds.
//
// Everything is double. The only rounding it models is the one the contract makes part of the
// stored state: a bf16 state pool stores bf16_rne of the running state (SPEC §9), so a pool
// marked `state_bf16` rounds what is stored (and a fused step continues from what it stored).
// Outputs are kept in double (the comparison rounds nothing).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <utility>
#include <vector>

namespace kref {

constexpr int K = 128;  // head dim K = V
constexpr int R = 128;  // gate rank

// ---------------------------------------------------------------------------------------
// bf16 helpers (test-side, independent of kda/numerics.h)
// ---------------------------------------------------------------------------------------
inline double bf16_value(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Rounds a double to the nearest bf16 value (ties to even), as a double.
inline double round_to_bf16(double x) {
  if (!std::isfinite(x) || x == 0.0) return x;
  int e = 0;
  std::frexp(x, &e);                       // |x| = m·2^e, m in [0.5, 1)
  const int quantum = std::max(e - 8, -133);  // 8 significant bits; bf16 subnormal step 2^-133
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);
  const double max_bf16 = std::ldexp(255.0, 120);  // (2 - 2^-7)·2^127
  if (std::fabs(r) > max_bf16) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

/// Bits of the bf16 nearest to x (x rounded first; exact through float).
inline uint16_t bf16_bits(double x) {
  if (std::isnan(x)) return 0x7fc0;
  const float f = float(round_to_bf16(x));
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}

/// One unit in the last place of bf16 at |x| (for tolerances).
inline double bf16_ulp(double x) {
  x = std::fabs(x);
  if (x < std::ldexp(1.0, -126)) return std::ldexp(1.0, -133);
  int e = 0;
  std::frexp(x, &e);
  return std::ldexp(1.0, e - 8);
}

// ---------------------------------------------------------------------------------------
// Scalar functions of SPEC §3
// ---------------------------------------------------------------------------------------
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double softplus(double z) { return z > 20.0 ? z : std::log1p(std::exp(z)); }
inline double silu(double a) { return a * sigmoid(a); }

// ---------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------
enum class Mode { kDecode, kPerToken, kRecord, kFused, kAppend };

/// Caller-error flags, numbered as SPEC §4 lists them (data.h asserts they equal the
/// library's values).
enum Flag : uint32_t {
  kSlotRange = 1u << 0,
  kRowRange = 1u << 1,
  kAccepted = 1u << 2,
  kPending = 1u << 3,
  kPadStart = 1u << 4,
};

struct Layer {
  int H = 0, W = 4;
  std::vector<double> conv_w;   ///< [3D][W]: conv_w[c·W + j], j = W-1 multiplies the newest input
  std::vector<double> conv_b;   ///< [3D] or empty
  std::vector<double> f_b;      ///< [D][R] or empty
  std::vector<double> A_log;    ///< [H]
  std::vector<double> dt_bias;  ///< [D]
  std::vector<double> norm_w;   ///< [K]
  double eps = 1e-5;
  bool has_lower_bound = false;
  double lower_bound = 0.0;
  bool output_norm = true;  ///< false (SPEC §9): out = o, no RMSNorm, no output gate
  int D() const { return H * K; }
};

/// The caches: conv windows in the logical [slots, 3D, window] view, states [slots, H, V, K],
/// records [rows, H, Qr, V] and [rows, H, Qr, 2K], pending [rows].
struct Pool {
  int H = 0, W = 4, window = 0;
  int64_t conv_slots = 0, state_slots = 0;
  bool state_bf16 = false;
  std::vector<double> conv, state;
  int64_t rows_r = 0;
  int Qr = 0;
  std::vector<double> corr, kg;
  std::vector<int64_t> pending;

  int D() const { return H * K; }
  double& win(int64_t s, int c, int col) { return conv[(size_t(s) * 3 * D() + c) * window + col]; }
  double* st(int64_t s, int h) { return &state[(size_t(s) * H + h) * K * K]; }
  double* u_at(int64_t row, int h, int t) { return &corr[((size_t(row) * H + h) * Qr + t) * K]; }
  double* kg_at(int64_t row, int h, int t) { return &kg[((size_t(row) * H + h) * Qr + t) * 2 * K]; }
  void store_state(int64_t s, int h, const std::vector<double>& S) {
    double* d = st(s, h);
    for (int i = 0; i < K * K; ++i) d[i] = state_bf16 ? round_to_bf16(S[i]) : S[i];
  }
};

/// One input row (token): the values of the bf16 inputs.
struct Row {
  std::vector<double> qkv;       ///< [3D]
  std::vector<double> out_gate;  ///< [D]
  std::vector<double> gate_in;   ///< [R] (f_a) or [D] (gate mode 2)
  std::vector<double> beta;      ///< [H]
};

struct Step {
  Mode mode = Mode::kDecode;
  int q = 1;
  std::vector<std::vector<int64_t>> slots;  ///< [B][cols] (cols = 1 for decode/record/fused)
  std::vector<int64_t> accepted;            ///< empty: all 1
  std::vector<int64_t> out_slots;           ///< empty: none (decode only)
  std::vector<int64_t> record_rows;         ///< empty: the checkpoint slot
  bool precomputed_gate = false;            ///< gate mode 2
  int64_t null_slot = 0;                    ///< -1: none
};

enum class Kind { kRun, kPad, kError };

struct Result {
  std::vector<double> out;  ///< [B·q][D]; zero for pad and error requests
  std::vector<Kind> kind;   ///< per request
  uint32_t flags = 0;
  int64_t first = -1;       ///< lowest request index with a flag, -1 = none
  std::set<int64_t> state_written, conv_written, pending_written;
  std::set<std::pair<int64_t, int>> records_written;  ///< (row, t), all heads
  /// Smallest and largest Σ y² over the post-conv q and k vectors (every run request, head and
  /// token): lets a test confirm that its inputs reach the regime it is meant to cover.
  double qk_sumsq_min = std::numeric_limits<double>::infinity(), qk_sumsq_max = 0.0;
};

inline bool is_pad(int64_t id, int64_t null_slot) { return id < 0 || id == null_slot; }

// ---------------------------------------------------------------------------------------
// Request resolution (SPEC §4: pads and caller errors found in the data)
// ---------------------------------------------------------------------------------------
struct Resolved {
  Kind kind = Kind::kPad;
  uint32_t flags = 0;
  int64_t acc = 1;
  int64_t win_in = 0, win_out = 0, state_in = 0, state_out = 0, row = 0, pending = 0;
};

inline Resolved resolve(const Pool& P, const Step& s, int b) {
  Resolved r;
  const auto& row = s.slots[b];
  const int64_t s0 = row[0];
  if (is_pad(s0, s.null_slot)) return r;  // a pad: nothing read or written
  const int64_t pool = std::min(P.conv_slots, P.state_slots);
  uint32_t f = 0;
  const int64_t acc = s.accepted.empty() ? 1 : s.accepted[b];
  r.acc = acc;
  bool acc_ok = acc >= 1 && acc <= int64_t(P.window) - P.W + 2;
  if (s.mode == Mode::kPerToken && acc > int64_t(row.size())) acc_ok = false;
  if (!acc_ok) f |= kAccepted;
  if (s0 >= pool) f |= kSlotRange;
  r.win_in = r.win_out = r.state_in = r.state_out = s0;
  switch (s.mode) {
    case Mode::kDecode:
      if (!s.out_slots.empty()) {
        const int64_t os = s.out_slots[b];
        if (os < 0 || os >= pool || os == s.null_slot) f |= kRowRange;
        r.win_out = r.state_out = os;
      }
      break;
    case Mode::kPerToken:
      if (acc_ok) {
        const int64_t st = row[size_t(acc - 1)];
        if (is_pad(st, s.null_slot)) f |= kPadStart;
        else if (st >= pool) f |= kSlotRange;
        r.state_in = st;
      }
      for (int t = 1; t < s.q; ++t)
        if (!is_pad(row[t], s.null_slot) && row[t] >= pool) f |= kSlotRange;
      break;
    case Mode::kRecord:
    case Mode::kFused:
    case Mode::kAppend: {
      const int64_t rr = s.record_rows.empty() ? s0 : s.record_rows[b];
      const bool ok = rr >= 0 && rr < P.rows_r && rr != s.null_slot;
      if (!ok) f |= kRowRange;
      r.row = rr;
      if ((s.mode == Mode::kFused || s.mode == Mode::kAppend) && ok) {
        const int64_t pend = P.pending[size_t(rr)];
        if (pend > P.Qr || pend < 0) f |= kPending;  // any count up to Qr (SPEC §4)
        r.pending = pend;
      }
      break;
    }
  }
  r.flags = f;
  r.kind = f ? Kind::kError : Kind::kRun;
  return r;
}

/// S[v,i] = S[v,i]·exp(g_t[i]) + u_t[v]·k_t[i] for the first n records of (row, h).
inline void fold(Pool& P, std::vector<double>& S, int64_t row, int h, int64_t n) {
  for (int t = 0; t < n; ++t) {
    const double* u = P.u_at(row, h, t);
    const double* kg = P.kg_at(row, h, t);
    for (int v = 0; v < K; ++v)
      for (int i = 0; i < K; ++i) S[v * K + i] = S[v * K + i] * std::exp(kg[K + i]) + u[v] * kg[i];
  }
}

// ---------------------------------------------------------------------------------------
// The step (SPEC §3, §4)
// ---------------------------------------------------------------------------------------
inline Result step(const Layer& L, Pool& P, const std::vector<Row>& rows, const Step& s) {
  const int B = int(s.slots.size()), q = s.q, H = L.H, D = L.D(), C = 3 * D, W = L.W;
  Result res;
  res.out.assign(size_t(B) * q * D, 0.0);
  res.kind.assign(B, Kind::kPad);
  for (int b = 0; b < B; ++b) {
    const Resolved r = resolve(P, s, b);
    res.kind[b] = r.kind;
    if (r.kind == Kind::kError) {
      res.flags |= r.flags;
      if (res.first < 0) res.first = b;
    }
    if (r.kind != Kind::kRun) continue;
    const int64_t off = r.acc - 1;

    // conv inputs: h_c for token t = [window[c, off+t .. off+W-2], x_0[c] .. x_t[c]][-W:]
    std::vector<double> y(size_t(q) * C);
    for (int c = 0; c < C; ++c) {
      std::vector<double> seq;  // W-1 window columns then the q inputs
      for (int j = 0; j < W - 1; ++j) seq.push_back(P.win(r.win_in, c, int(off + j)));
      for (int t = 0; t < q; ++t) seq.push_back(rows[size_t(b) * q + t].qkv[c]);
      for (int t = 0; t < q; ++t) {
        double a = L.conv_b.empty() ? 0.0 : L.conv_b[c];
        for (int j = 0; j < W; ++j) a += L.conv_w[size_t(c) * W + j] * seq[t + j];
        y[size_t(t) * C + c] = silu(a);
      }
    }

    for (int h = 0; h < H; ++h) {
      const double a = std::exp(L.A_log[h]);
      std::vector<double> qn(size_t(q) * K), kn(size_t(q) * K), g(size_t(q) * K), beta(q);
      for (int t = 0; t < q; ++t) {
        const Row& in = rows[size_t(b) * q + t];
        const double* yq = &y[size_t(t) * C + h * K];
        const double* yk = yq + D;
        double sq = 0, sk = 0;
        for (int i = 0; i < K; ++i) {
          sq += yq[i] * yq[i];
          sk += yk[i] * yk[i];
        }
        res.qk_sumsq_min = std::min({res.qk_sumsq_min, sq, sk});
        res.qk_sumsq_max = std::max({res.qk_sumsq_max, sq, sk});
        const double nq = std::sqrt(sq + 1e-6), nk = std::sqrt(sk + 1e-6);
        for (int i = 0; i < K; ++i) {
          qn[t * K + i] = yq[i] / nq / std::sqrt(double(K));
          kn[t * K + i] = yk[i] / nk;
        }
        for (int i = 0; i < K; ++i) {
          double z = 0;
          if (s.precomputed_gate) {
            z = in.gate_in[h * K + i];
          } else {
            for (int j = 0; j < R; ++j) z += L.f_b[size_t(h * K + i) * R + j] * in.gate_in[j];
          }
          z += L.dt_bias[h * K + i];
          g[t * K + i] = L.has_lower_bound ? L.lower_bound * sigmoid(a * z) : -a * softplus(z);
        }
        beta[t] = sigmoid(in.beta[h]);
      }

      std::vector<double> S(P.st(r.state_in, h), P.st(r.state_in, h) + K * K);
      // append: a full row is folded and written back, then the token starts a new row;
      // otherwise the pending records are folded into a running copy that is not written
      const bool append_full = s.mode == Mode::kAppend && r.pending == P.Qr;
      const int64_t pos0 = s.mode == Mode::kAppend ? (append_full ? 0 : r.pending) : 0;
      if ((s.mode == Mode::kFused || s.mode == Mode::kAppend) && r.pending > 0) {
        fold(P, S, r.row, h, r.pending);
        if (s.mode == Mode::kFused || append_full) {
          P.store_state(r.state_in, h, S);
          res.state_written.insert(r.state_in);
          if (P.state_bf16)
            for (auto& x : S) x = round_to_bf16(x);  // continue from what was stored
        }
      }
      const bool records = s.mode == Mode::kRecord || s.mode == Mode::kFused || s.mode == Mode::kAppend;
      for (int t = 0; t < q; ++t) {
        const double* kt = &kn[t * K];
        const double* qt = &qn[t * K];
        const double* vt = &y[size_t(t) * C + 2 * D + h * K];
        std::vector<double> o(K), u(K);
        for (int v = 0; v < K; ++v) {
          double dot = 0;
          for (int i = 0; i < K; ++i) {
            S[v * K + i] *= std::exp(g[t * K + i]);
            dot += S[v * K + i] * kt[i];
          }
          u[v] = beta[t] * (vt[v] - dot);
          double ov = 0;
          for (int i = 0; i < K; ++i) {
            S[v * K + i] += u[v] * kt[i];
            ov += S[v * K + i] * qt[i];
          }
          o[v] = ov;
        }
        if (records) {
          double* ud = P.u_at(r.row, h, pos0 + t);
          double* kgd = P.kg_at(r.row, h, pos0 + t);
          for (int i = 0; i < K; ++i) {
            ud[i] = u[i];
            kgd[i] = kt[i];
            kgd[K + i] = g[t * K + i];
          }
          res.records_written.insert({r.row, int(pos0 + t)});
        }
        if (s.mode == Mode::kPerToken && !is_pad(s.slots[b][t], s.null_slot)) {
          P.store_state(s.slots[b][t], h, S);
          res.state_written.insert(s.slots[b][t]);
        }
        double* dst = &res.out[(size_t(b) * q + t) * D + h * K];
        if (!L.output_norm) {
          for (int v = 0; v < K; ++v) dst[v] = o[v];
          continue;
        }
        double ss = 0;
        for (int v = 0; v < K; ++v) ss += o[v] * o[v];
        const double rr = 1.0 / std::sqrt(ss / K + L.eps);
        const Row& in = rows[size_t(b) * q + t];
        for (int v = 0; v < K; ++v) dst[v] = o[v] * rr * L.norm_w[v] * sigmoid(in.out_gate[h * K + v]);
      }
      if (s.mode == Mode::kDecode) {
        P.store_state(r.state_out, h, S);
        res.state_written.insert(r.state_out);
      }
    }
    if (s.mode == Mode::kFused || s.mode == Mode::kAppend) {
      const bool full = s.mode == Mode::kAppend && r.pending == P.Qr;
      P.pending[size_t(r.row)] = s.mode == Mode::kFused ? 0 : (full ? 0 : r.pending) + 1;
      res.pending_written.insert(r.row);
    }
    // the window after the step: new[i] = old[off+1+i] (i < W-2), new[W-2+t] = x_t
    const int w = W - 2 + q;
    std::vector<double> nw(size_t(C) * w);
    for (int c = 0; c < C; ++c) {
      for (int i = 0; i < W - 2; ++i) nw[size_t(c) * w + i] = P.win(r.win_in, c, int(off + 1 + i));
      for (int t = 0; t < q; ++t) nw[size_t(c) * w + W - 2 + t] = rows[size_t(b) * q + t].qkv[c];
    }
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < w; ++i) P.win(r.win_out, c, i) = nw[size_t(c) * w + i];
    res.conv_written.insert(r.win_out);
  }
  return res;
}

/// commit (counts given) or flush (counts empty: use pending[row], then zero it).
inline Result commit(const Layer& L, Pool& P, const std::vector<int64_t>& slots,
                     const std::vector<int64_t>& record_rows, const std::vector<int64_t>& counts,
                     int64_t null_slot) {
  Result res;
  const int B = int(slots.size());
  res.kind.assign(B, Kind::kPad);
  const bool flush = counts.empty();
  for (int b = 0; b < B; ++b) {
    const int64_t s = slots[b];
    if (is_pad(s, null_slot)) continue;
    uint32_t f = 0;
    if (s >= P.state_slots) f |= kSlotRange;
    const int64_t row = record_rows.empty() ? s : record_rows[b];
    const bool row_ok = row >= 0 && row < P.rows_r && row != null_slot;
    if (!row_ok) f |= kRowRange;
    int64_t n = 0;
    if (!flush) n = counts[b];
    else if (row_ok) n = P.pending[size_t(row)];
    if (n < 0 || n > P.Qr) f |= kPending;
    if (f) {
      res.kind[b] = Kind::kError;
      res.flags |= f;
      if (res.first < 0) res.first = b;
      continue;
    }
    res.kind[b] = Kind::kRun;
    if (n > 0) {
      for (int h = 0; h < L.H; ++h) {
        std::vector<double> S(P.st(s, h), P.st(s, h) + K * K);
        fold(P, S, row, h, n);
        P.store_state(s, h, S);
      }
      res.state_written.insert(s);
    }
    if (flush) {
      P.pending[size_t(row)] = 0;
      res.pending_written.insert(row);
    }
  }
  return res;
}

}  // namespace kref
