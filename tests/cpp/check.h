// tests/cpp/check.h — the comparison of everything a step wrote against the float64 reference
// (reference.h) with the tolerances of SPEC §8 / §9, and bitwise checks of everything it must
// not write (other slots, slot padding, window columns >= w, other records, out padding).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "data.h"

namespace kt {

// ---------------------------------------------------------------------------------------
// Checks against the reference
// ---------------------------------------------------------------------------------------
struct Measured {
  double out = 0;         ///< max |err| / (2^-8|ref| + 2e-3·max|ref|): passes at <= 1
  double state = 0;       ///< max |err| / max |ref| over the written state slots
  double state_bf16 = 0;  ///< bf16 pools: max |err| / (1 bf16 ulp(ref) + 2e-5·n·max|ref|): passes at <= 1
  double records = 0;     ///< max over u, k, g of max |err| / max |ref|
  double max_out_ref = 0, max_state_ref = 0;
  bool state_bf16_pool = false;  ///< `state` is then a bf16 pool's (rounding-dominated) ratio
};

/// The reference a bf16-state fused step's records and out are compared with. Such a step stores
/// the fold of its pending records as bf16 and verifies from what it stored (SPEC §9); where the
/// library's fp32 fold and the float64 fold round an element to neighbouring bf16 values, the two
/// verifies start one ulp apart there. So the records and out are compared with a float64
/// record-mode verify continued from the checkpoints the library stored (the stored checkpoint
/// itself is compared with the float64 fold, within SPEC §9's 1 ulp + 2e-5·max|ref|), and the
/// records keep SPEC §8's "records as the state" tolerance.
struct Continued {
  kref::Pool pool;
  kref::Result res;
};

/// Continued reference of a step (nullopt unless a fused step on a bf16 state pool).
/// `before_ref`: the float64 mirror before the step; `res`: the fused reference's result.
inline std::optional<Continued> continued_from_stored(const kref::Layer& L, const kref::Pool& before_ref,
                                                      const PoolData& after, const std::vector<kref::Row>& rows,
                                                      kref::Step st, const kref::Result& res) {
  if (!after.sp.state_bf16 || st.mode != kref::Mode::kFused) return std::nullopt;
  Continued c{before_ref, {}};
  for (size_t b = 0; b < st.slots.size(); ++b) {
    if (res.kind[b] != kref::Kind::kRun) {
      st.slots[b][0] = -1;  // errors of the fused step (e.g. PENDING) stay out of the record verify
      continue;
    }
    const int64_t slot = st.slots[b][0], row = st.record_rows.empty() ? slot : st.record_rows[b];
    for (int h = 0; h < after.sp.H; ++h) {
      double* d = c.pool.st(slot, h);
      const int64_t o = after.state_off(slot, h, 0, 0);
      for (int i = 0; i < K * K; ++i) d[i] = after.state_get_off(o + i);
    }
    c.pool.pending[size_t(row)] = 0;
  }
  st.mode = kref::Mode::kRecord;
  c.res = kref::step(L, c.pool, rows, st);
  return c;
}

/// Compares the library's result (pool `after`, `out`, `status`) with the reference's
/// (`rp`, `res`), `before` being the pool before the step. n = steps chained so far (the
/// state/records tolerance is 1e-5·n). Out rows of pads and errors must be zero bits,
/// out padding columns keep the poison, windows are bitwise, and every byte the step does
/// not own (other slots, padding, columns >= w, other records) is bitwise unchanged.
inline Measured check_step(const PoolData& before, const PoolData& after, const kref::Pool& rp,
                           const kref::Result& res, const OutBuf* out, int q, double n,
                           const kda::Status& status, const Continued* cont = nullptr) {
  Measured m;
  m.state_bf16_pool = after.sp.state_bf16;
  const int D = after.D();
  // ---- status ----------------------------------------------------------------------------
  EXPECT_EQ(status.flags, res.flags) << "status flags: got " << status.describe();
  EXPECT_EQ(status.first_request, res.first) << "status first request: got " << status.describe();

  // ---- out ---------------------------------------------------------------------------------
  if (out) {
    const int B = int(res.kind.size());
    double M = 0;
    for (double x : cont ? cont->res.out : res.out) M = std::max(M, std::fabs(x));
    m.max_out_ref = M;
    int reported = 0;
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < q; ++t) {
        const int r = b * q + t;
        for (int c = 0; c < D; ++c) {
          const uint16_t got = out->at(r, c);
          if (res.kind[b] != kref::Kind::kRun) {
            if (got != 0 && reported++ < 5)
              ADD_FAILURE() << "out row " << r << " col " << c << " of a pad/error request: bits 0x" << std::hex << got
                            << std::dec << ", expected 0";
            continue;
          }
          const double ref = (cont ? cont->res.out : res.out)[size_t(r) * D + c];
          const double g = unbf(got);
          const double tol = std::ldexp(std::fabs(ref), -8) + 2e-3 * M;
          const double ratio = std::isfinite(g) ? std::fabs(g - ref) / std::max(tol, 1e-300) : INFINITY;
          m.out = std::max(m.out, ratio);
          if (!(ratio <= 1.0) && reported++ < 5)
            ADD_FAILURE() << "out[" << r << ", " << c << "] = " << g << ", reference " << ref << " (tol " << tol << ")";
        }
        for (int64_t c = D; c < out->row; ++c)
          if (out->at(r, int(c)) != kPoison && reported++ < 5)
            ADD_FAILURE() << "out row " << r << " padding column " << c << " was written";
      }
  }

  // ---- state -------------------------------------------------------------------------------
  {
    const int H = after.sp.H;
    double M = 0, E = 0, worst_bf = 0;
    // bf16 pools (SPEC §9): the reference stores bf16_rne of its float64 state. Where the fp32
    // and float64 values round to neighbouring bf16 values the stored copies differ by one ulp
    // (chained bf16 checks therefore re-mirror the pool before each step: world.h).
    const double bf16_ulps = 1.0;
    for (int64_t s : res.state_written)
      for (int h = 0; h < H; ++h) {
        const double* ref = const_cast<kref::Pool&>(rp).st(s, h);
        for (int i = 0; i < K * K; ++i) M = std::max(M, std::fabs(ref[i]));
      }
    for (int64_t s : res.state_written)
      for (int h = 0; h < H; ++h) {
        const double* ref = const_cast<kref::Pool&>(rp).st(s, h);
        const int64_t o = after.state_off(s, h, 0, 0);
        for (int i = 0; i < K * K; ++i) {
          const double g = after.state_get_off(o + i);
          const double e = std::isfinite(g) ? std::fabs(g - ref[i]) : INFINITY;
          E = std::max(E, e);
          if (after.sp.state_bf16)
            worst_bf = std::max(worst_bf, e / (bf16_ulps * kref::bf16_ulp(ref[i]) + 2e-5 * n * M));
        }
      }
    m.max_state_ref = M;
    m.state_bf16 = worst_bf;
    m.state = M > 0 ? E / M : E;
    if (after.sp.state_bf16)
      EXPECT_LE(worst_bf, 1.0) << "bf16 state vs reference: max |err| / (" << bf16_ulps
                               << " ulp + 2e-5·n·max|ref|), n = " << n;
    else
      EXPECT_LE(m.state, 1e-5 * n) << "state max|err|/max|ref| (max|ref| = " << M << "), n = " << n;
    // every other byte unchanged
    std::vector<unsigned char> expect = before.state;
    const size_t es = after.state_es();
    for (int64_t s : res.state_written) {
      const size_t o = size_t(after.state_off(s, 0, 0, 0)) * es, len = size_t(H) * K * K * es;
      std::memcpy(expect.data() + o, after.state.data() + o, len);
    }
    if (expect != after.state) {
      size_t i = 0;
      while (expect[i] == after.state[i]) ++i;
      ADD_FAILURE() << "state pool byte " << i << " (slot " << int64_t(i / es) / after.state_slot_stride
                    << ") changed although the step does not own it";
    }
  }

  // ---- records -----------------------------------------------------------------------------
  if (after.sp.rows_r > 0) {
    const int H = after.sp.H;
    double Mu = 0, Mk = 0, Mg = 0, Eu = 0, Ek = 0, Eg = 0;
    kref::Pool& P = const_cast<kref::Pool&>(cont ? cont->pool : rp);
    for (auto [row, t] : res.records_written)
      for (int h = 0; h < H; ++h) {
        const double* u = P.u_at(row, h, t);
        const double* kg = P.kg_at(row, h, t);
        const float* gu = &after.corr[after.corr_off(row, h, t)];
        const float* gk = &after.kg[after.kg_off(row, h, t)];
        for (int i = 0; i < K; ++i) {
          Mu = std::max(Mu, std::fabs(u[i]));
          Mk = std::max(Mk, std::fabs(kg[i]));
          Mg = std::max(Mg, std::fabs(kg[K + i]));
          auto err = [](double g, double r) { return std::isfinite(g) ? std::fabs(g - r) : INFINITY; };
          Eu = std::max(Eu, err(gu[i], u[i]));
          Ek = std::max(Ek, err(gk[i], kg[i]));
          Eg = std::max(Eg, err(gk[K + i], kg[K + i]));
        }
      }
    auto rel = [](double e, double M) { return M > 0 ? e / M : e; };
    m.records = std::max({rel(Eu, Mu), rel(Ek, Mk), rel(Eg, Mg)});
    // SPEC §8 "records as the state": 1e-5·n, bf16 state pools included (their fused steps are
    // compared with the verify continued from the stored checkpoint: Continued).
    const double rec_tol = 1e-5 * n;
    EXPECT_LE(m.records, rec_tol) << "records max|err|/max|ref| (u " << rel(Eu, Mu) << ", k " << rel(Ek, Mk)
                                   << ", g " << rel(Eg, Mg) << "), n = " << n;
    std::vector<float> ec = before.corr, ek = before.kg;
    for (auto [row, t] : res.records_written)
      for (int h = 0; h < H; ++h) {
        std::memcpy(&ec[after.corr_off(row, h, t)], &after.corr[after.corr_off(row, h, t)], K * 4);
        std::memcpy(&ek[after.kg_off(row, h, t)], &after.kg[after.kg_off(row, h, t)], 2 * K * 4);
      }
    EXPECT_TRUE(std::memcmp(ec.data(), after.corr.data(), ec.size() * 4) == 0)
        << "correction records changed outside the (row, t < q) the step owns";
    EXPECT_TRUE(std::memcmp(ek.data(), after.kg.data(), ek.size() * 4) == 0)
        << "key_gate records changed outside the (row, t < q) the step owns";
    for (int64_t r = 0; r < after.sp.rows_r && r < int64_t(after.pending.size()); ++r)
      EXPECT_EQ(after.pending[r], rp.pending[r]) << "pending[" << r << "]";
  }

  // ---- conv windows: bitwise ---------------------------------------------------------------
  {
    PoolData expect;
    expect.sp = after.sp;
    expect.conv_slot_stride = after.conv_slot_stride;
    expect.chan_stride = after.chan_stride;
    expect.col_stride = after.col_stride;
    expect.conv = before.conv;
    kref::Pool& P = const_cast<kref::Pool&>(rp);
    for (int64_t s : res.conv_written)
      for (int64_t c = 0; c < after.C(); ++c)
        for (int col = 0; col < after.sp.window; ++col) expect.conv_set(s, c, col, P.win(s, int(c), col));
    if (expect.conv != after.conv) {
      int reported = 0;
      for (int64_t s = 0; s < after.sp.nslots && reported < 5; ++s)
        for (int64_t c = 0; c < after.C() && reported < 5; ++c)
          for (int col = 0; col < after.sp.window && reported < 5; ++col)
            if (expect.conv_get(s, c, col) != after.conv_get(s, c, col) &&
                !(std::isnan(expect.conv_get(s, c, col)) && std::isnan(after.conv_get(s, c, col)))) {
              ++reported;
              ADD_FAILURE() << "conv window slot " << s << " channel " << c << " column " << col << ": got "
                            << after.conv_get(s, c, col) << ", expected " << expect.conv_get(s, c, col);
            }
      if (!reported) ADD_FAILURE() << "conv pool padding bytes changed";
    }
  }
  return m;
}


}  // namespace kt
