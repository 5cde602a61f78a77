// tests/cpp/api.h — running the test data through the public kda::PreparedKda API: one step
// (packed or separate views, any index-tensor layout), commit / flush, a prepared object of a
// test layer, and the message of a refused call.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "data.h"

namespace kt {

// ---------------------------------------------------------------------------------------
// One step through the public API
// ---------------------------------------------------------------------------------------
struct StepSpec {
  kref::Step ref;          // mode, q, slots [B][cols], accepted, out_slots, record_rows, gate, null_slot
  bool slots_2d = false;   // decode / record / fused: pass slots as [B, 1]
  int strided = 0;         // index tensor layout (make_index_2d): 0 dense, 1 table slice, 2 column-major, 3 every other column
  bool use_views = false;  // run_views instead of run
  bool no_out_gate = false;  // run_views without the out_gate view (a layer without the output norm)
};

inline std::vector<int64_t> first_column(const std::vector<std::vector<int64_t>>& s) {
  std::vector<int64_t> v;
  for (auto& r : s) v.push_back(r[0]);
  return v;
}

/// Runs the step on the library. Throws what the library throws.
inline void run_step(PreparedKda& kda, PoolData& pool, InputData& in, OutBuf& out, const StepSpec& sp) {
  const kref::Step& s = sp.ref;
  Index slots = (s.mode == kref::Mode::kPerToken || sp.slots_2d) ? make_index_2d(s.slots, sp.strided)
                                                                  : make_index_1d(first_column(s.slots), sp.strided);
  Index acc, outs, rows;
  StepArgs a;
  a.slots = slots.view;
  a.q = s.q;
  a.mode = to_mode(s.mode);
  if (!s.accepted.empty()) {
    acc = make_index_1d(s.accepted, sp.strided);
    a.accepted = acc.view;
  }
  if (!s.out_slots.empty()) {
    outs = make_index_1d(s.out_slots, sp.strided);
    a.out_slots = outs.view;
  }
  if (!s.record_rows.empty()) {
    rows = make_index_1d(s.record_rows, sp.strided);
    a.record_rows = rows.view;
  }
  Caches c = pool.caches();
  if (sp.use_views || sp.no_out_gate) {
    InputViews v = in.views();
    if (sp.no_out_gate) v.out_gate = TensorView{};
    kda.run_views(v, out.view(), c, a);
  } else {
    kda.run(in.projected(), out.view(), c, a);
  }
}

inline void run_commit(PreparedKda& kda, PoolData& pool, const std::vector<int64_t>& slots,
                       const std::vector<int64_t>& record_rows, const std::vector<int64_t>& counts, int strided) {
  Index s = make_index_1d(slots, strided), r, n;
  TensorView rv, nv;
  if (!record_rows.empty()) {
    r = make_index_1d(record_rows, strided);
    rv = r.view;
  }
  Caches c = pool.caches();
  if (counts.empty()) {
    kda.flush(c, s.view, rv);
  } else {
    n = make_index_1d(counts, strided);
    kda.commit(c, s.view, rv, n.view);
  }
}

inline std::unique_ptr<PreparedKda> make_kda(LayerData& L, bool ds, int null_slot = 0,
                                             std::unordered_map<StepKey, Policy, kda::StepKeyHash> policies = {},
                                             Policy default_policy = {}) {
  return std::make_unique<PreparedKda>(L.weights(), std::move(policies), ds, null_slot, default_policy);
}

/// something else or nothing (so EXPECT_THAT(..., HasSubstr(...)) fails readably).
template <class F>
std::string invalid_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<wrong exception type: ") + e.what() + ">";
  }
  return "<no exception>";
}


}  // namespace kt
