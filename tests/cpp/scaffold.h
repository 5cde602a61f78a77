// tests/cpp/scaffold.h — the valid starting point of the host-validation tests
// (test_validation.cpp, test_validation_table.cpp): a layer (H = 2, conv bias), a DS pool
// with records and pending (window 6, Qr 4, 6 slots), inputs and poisoned outputs for a
// decode step (B = 2) and a verify step (B = 2, q = 2), index tensors, a prepared object.
// Each test breaks exactly one thing of it.
#pragma once

#include <memory>
#include <vector>

#include "api.h"
#include "data.h"

namespace kt {

struct ValidScaffold {
  static constexpr int H = 2, D = H * K, WINDOW = 6, NSLOTS = 6, QR = 4;

  Rng rng;
  LayerData L;
  PoolData pool;
  InputData in1, in2;  // rows 2 (decode, B = 2) and 4 (verify, B = 2, q = 2)
  OutBuf out1, out2;
  Index s1, s2, acc, rows, counts;
  std::unique_ptr<PreparedKda> kda;

  explicit ValidScaffold(uint64_t seed) : rng{seed} {
    L = random_layer(rng, layer_opts(H, false, true));
    pool = make_pool(pool_spec(H, WINDOW, NSLOTS, QR));
    pool.randomize(rng);
    in1 = random_inputs(rng, 2, H);
    in2 = random_inputs(rng, 4, H);
    out1 = make_out(2, D);
    out2 = make_out(4, D);
    s1 = make_index_1d({1, 3}, 0);
    s2 = make_index_2d({{1, 2}, {3, 4}}, 0);
    acc = make_index_1d({1, 2}, 0);
    rows = make_index_1d({1, 3}, 0);
    counts = make_index_1d({1, 1}, 0);
    kda = make_kda(L, true);
  }

  StepArgs args(StepMode m) {
    StepArgs a;
    a.mode = m;
    a.q = m == StepMode::kDecode ? 1 : 2;
    a.slots = m == StepMode::kPerToken ? s2.view : s1.view;
    return a;
  }
  TensorView proj(StepMode m) { return m == StepMode::kDecode ? in1.projected() : in2.projected(); }
  TensorView outv(StepMode m) { return m == StepMode::kDecode ? out1.view() : out2.view(); }
  void run(StepMode m, const StepArgs& a, const Caches& c) { kda->run(proj(m), outv(m), c, a); }
  void run(StepMode m, const StepArgs& a) { run(m, a, pool.caches()); }
  void run(StepMode m) { run(m, args(m)); }

  /// Everything a refused call must leave bytewise unchanged.
  struct Snap {
    PoolData pool;
    std::vector<uint16_t> o1, o2;
  };
  Snap snapshot() const { return Snap{pool, out1.mem, out2.mem}; }
  bool unchanged(const Snap& s) const {
    return s.pool.conv == pool.conv && s.pool.state == pool.state && s.pool.corr == pool.corr &&
           s.pool.kg == pool.kg && s.pool.pending == pool.pending && s.o1 == out1.mem && s.o2 == out2.mem;
  }
};

}  // namespace kt
