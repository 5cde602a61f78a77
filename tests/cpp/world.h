// tests/cpp/world.h — a layer, a cache pool and its float64 mirror, and a prepared object:
// the scaffold of the contract tests, which run sequences of steps on the library and on the
// reference side by side and check every step (check.h: check_step).
#pragma once

#include "api.h"
#include "check.h"
#include "data.h"

namespace kt {

struct World {
  Rng rng;
  LayerData L;
  kref::Layer RL;
  PoolData pool;
  kref::Pool rp;
  std::unique_ptr<PreparedKda> kda;
  int64_t null_slot = 0;
  /// Re-mirror the pool into the reference before every step (bf16 state chains: each step is
  /// then compared from the same inputs, SPEC §8/§9, instead of carrying rounding flips).
  bool remirror = false;
  /// How step() hands the inputs over (api.h StepSpec): separate views, or views without
  /// out_gate (a layer without the output norm).
  bool use_views = false, no_out_gate = false;
  /// Every out-gate input NaN (packed row and views): a layer without the output norm must not
  /// read them, so its outputs stay finite and match the reference.
  bool poison_out_gate = false;

  World(uint64_t seed, const LayerOpts& lo, const PoolSpec& ps, int null_slot_ = 0, Policy default_policy = {})
      : rng(seed) {
    L = random_layer(rng, lo);
    init(ps, null_slot_, default_policy);
  }
  /// With a layer made (and possibly edited) by the caller.
  World(uint64_t seed, LayerData layer, const PoolSpec& ps, int null_slot_ = 0, Policy default_policy = {})
      : rng(seed), L(std::move(layer)) {
    init(ps, null_slot_, default_policy);
  }

  void init(const PoolSpec& ps, int null_slot_, Policy default_policy) {
    RL = L.ref();
    pool = make_pool(ps);
    pool.randomize(rng);
    rp = pool.to_ref();
    null_slot = null_slot_;
    kda = make_kda(L, ps.ds, null_slot_, {}, default_policy);
    Caches c = pool.caches();
    kda->prepare(c);
  }
  /// After editing `pool` by hand: mirror it again.
  void resync() { rp = pool.to_ref(); }

  void set_pending(int64_t row, int v) {
    pool.pending[size_t(row)] = v;
    rp.pending[size_t(row)] = v;
  }

  /// One step on both sides, checked; n = steps chained so far.
  Measured step(kref::Step st, double n, const InputOpts& io = {}, int strided = 0, InputData* keep = nullptr,
                OutBuf* keep_out = nullptr) {
    st.null_slot = null_slot;
    st.precomputed_gate = io.gate2;
    const int B = int(st.slots.size());
    InputData in = random_inputs(rng, B * st.q, L.H, io);
    if (poison_out_gate)
      for (int r = 0; r < B * st.q; ++r)
        for (int c = 0; c < L.D(); ++c) set_input(in, r, 3 * L.D() + c, std::nan(""));
    OutBuf out = make_out(B * st.q, L.D(), 3);
    if (remirror) {
      rp = pool.to_ref();
      n = 1;
    }
    const PoolData before = pool;
    StepSpec sp;
    sp.ref = st;
    sp.strided = strided;
    sp.use_views = use_views;
    sp.no_out_gate = no_out_gate;
    run_step(*kda, pool, in, out, sp);
    const bool continued = pool.sp.state_bf16 && st.mode == kref::Mode::kFused;
    const kref::Pool rp0 = continued ? rp : kref::Pool{};
    const kref::Result res = kref::step(RL, rp, in.ref, st);
    const std::optional<Continued> cont =
        continued ? continued_from_stored(RL, rp0, pool, in.ref, st, res) : std::nullopt;
    const Measured m = check_step(before, pool, rp, res, &out, st.q, n, kda->status(), cont ? &*cont : nullptr);
    if (keep) *keep = std::move(in);
    if (keep_out) *keep_out = std::move(out);
    return m;
  }

  /// commit (counts given) or flush (counts empty) on both sides, checked.
  Measured fold(const std::vector<int64_t>& slots, const std::vector<int64_t>& rows,
                const std::vector<int64_t>& counts, double n) {
    if (remirror) {
      rp = pool.to_ref();
      n = 1;
    }
    const PoolData before = pool;
    run_commit(*kda, pool, slots, rows, counts, false);
    const kref::Result res = kref::commit(RL, rp, slots, rows, counts, null_slot);
    return check_step(before, pool, rp, res, nullptr, 1, n, kda->status());
  }
};

inline kref::Step make_step(kref::Mode mode, int q, std::vector<std::vector<int64_t>> slots,
                            std::vector<int64_t> accepted = {}, std::vector<int64_t> out_slots = {},
                            std::vector<int64_t> record_rows = {}) {
  kref::Step s;
  s.mode = mode;
  s.q = q;
  s.slots = std::move(slots);
  s.accepted = std::move(accepted);
  s.out_slots = std::move(out_slots);
  s.record_rows = std::move(record_rows);
  return s;
}

/// [[a], [b], ...] from a vector of ids.
inline std::vector<std::vector<int64_t>> column(const std::vector<int64_t>& ids) {
  std::vector<std::vector<int64_t>> s;
  for (int64_t id : ids) s.push_back({id});
  return s;
}

}  // namespace kt
