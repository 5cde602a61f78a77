// src/api/prepared.cpp — kda::PreparedKda (kda/prepared.h): orchestration only. A step is
//   validate (src/validate) -> resolve its plan once (PlanCache) -> pick the plan for its
//   inputs (Plan::for_inputs) -> fill StepParams (params.cpp) -> backend->step.
#include <algorithm>
#include <climits>
#include <vector>

#include "api/derived.h"
#include "api/params.h"
#include "api/plan_cache.h"
#include "backend.h"
#include "kda/prepared.h"
#include "validate/validate.h"

namespace kda {

struct PreparedKda::Impl {
  LayerWeights weights;
  validate::Layer layer;
  int null_slot = 0;
  std::unique_ptr<Backend> backend;
  api::DerivedWeights derived;
  api::PlanCache plans;
  std::unique_ptr<Buffer> arrivals;  ///< per records row (CUDA; fused steps and flush)
  int64_t arrivals_n = 0;
  std::unique_ptr<Buffer> gate_ws;  ///< gate mode 1 logits [gate_ws_rows, D] fp32 (CUDA)
  int64_t gate_ws_rows = 0;

  Impl(const LayerWeights& w, validate::Layer l, int null, api::PlanCache::Policies policies, Policy dflt)
      : weights(w), layer(l), null_slot(null), plans(std::move(policies), dflt) {}

  bool on_cuda() const { return layer.place.device == Device::kCUDA; }

  const Plan& resolve(const StepKey& key, const Caches& c) {
    LayerShape facts = layer_shape(layer.H, layer.W, layer.has_f_b, c, layer.conv_dim_first);
    facts.gate_ws_rows = gate_ws_rows;
    return plans.resolve(key, facts, backend->info());
  }

  api::LayerParams params() const {
    api::LayerParams lp;
    lp.weights = &weights;
    lp.layer = &layer;
    lp.null_slot = null_slot;
    lp.conv_w = derived.conv_w();
    lp.norm_w = derived.norm_w();
    lp.error_flags = backend->error_flags();
    lp.error_index = backend->error_index();
    lp.arrivals = arrivals ? static_cast<int32_t*>(arrivals->data()) : nullptr;
    lp.gate_ws = gate_ws ? static_cast<float*>(gate_ws->data()) : nullptr;
    return lp;
  }

  /// The part of a step after its plan is known: the views and arguments, then the launch.
  void step(InputViews in, const TensorView& out, const Caches& c, const validate::CacheFacts& facts, const StepArgs& a,
            int64_t B, const Plan& plan, int64_t pitch_seen) {
    validate::inputs(in, out, plan, layer, pitch_seen);
    validate::step_args(a, B, layer);
    validate::key_fits(plan.key, facts, layer);
    if (mode_traits(a.mode).pending && on_cuda()) validate::arrivals(facts, arrivals_n);
    if (B == 0) return;  // rows = 0 is a no-op (SPEC §4)
    // Without the output norm the out gate is not read (SPEC §9): its alignment must not send a
    // bulk-copy plan to its fallback, and a null pointer keeps any read from going unnoticed.
    if (!layer.output_norm) in.out_gate = TensorView{};
    const Plan& launch = plan.for_inputs(in);
    backend->step(api::step_params(params(), in, out, c, facts, a, B, launch), launch, a.stream);
  }

  void fold(const Caches& c, const TensorView& slots, const TensorView& record_rows, const TensorView& counts,
            bool flush, void* stream) {
    const auto facts = validate::caches(c, layer, {.records = true, .pending = flush});
    const int64_t B = validate::fold_args(slots, record_rows, counts, flush, layer);
    if (flush && on_cuda()) validate::arrivals(facts, arrivals_n);
    if (B == 0) return;
    backend->commit(api::commit_params(params(), c, facts, slots, record_rows, counts, B), stream);
  }
};

PreparedKda::PreparedKda(const LayerWeights& weights, std::unordered_map<StepKey, Policy, StepKeyHash> policies,
                         bool conv_dim_first, int null_slot, Policy default_policy) {
  const validate::Layer layer = validate::weights(weights, conv_dim_first);
  validate::null_slot(null_slot);
  validate::policies(policies, default_policy);
  impl_ = std::make_unique<Impl>(weights, layer, null_slot, std::move(policies), default_policy);
  impl_->backend = layer.place.device == Device::kCUDA ? make_cuda_backend(layer.place.id) : make_cpu_backend();
  impl_->derived.derive(*impl_->backend, weights);
}

PreparedKda::~PreparedKda() = default;

void PreparedKda::process_weights_after_loading(const LayerWeights& weights) {
  Impl& m = *impl_;
  validate::reload(weights, m.layer);
  m.weights = weights;
  m.derived.derive(*m.backend, weights);
}

void PreparedKda::prepare(const Caches& caches) {
  Impl& m = *impl_;
  validate::CacheNeeds needs{caches.correction.defined() || caches.key_gate.defined(), caches.pending.defined()};
  for (const auto& [key, policy] : m.plans.policies()) {
    const validate::CacheNeeds n = validate::needs_of(key.mode);
    needs.records |= n.records;
    needs.pending |= n.pending;
  }
  const auto facts = validate::caches(caches, m.layer, needs);
  for (const auto& [key, policy] : m.plans.policies()) validate::key_fits(key, facts, m.layer);
  // The gate mode 1 workspace: rows for every policy key whose plan takes mode 1 when the
  // workspace is large enough (one allocation, kept and only grown: captured graphs of
  // smaller keys keep their address unless a later prepare() needs more).
  if (m.on_cuda() && m.layer.has_f_b) {
    LayerShape unbounded = layer_shape(m.layer.H, m.layer.W, m.layer.has_f_b, caches, m.layer.conv_dim_first);
    unbounded.gate_ws_rows = INT64_MAX;
    int64_t rows = 0;
    for (const auto& [key, policy] : m.plans.policies())
      rows = std::max(rows, plan_step(key, policy, unbounded, m.backend->info()).gate_ws_rows);
    if (rows > m.gate_ws_rows) {
      m.gate_ws = m.backend->allocate(size_t(rows) * size_t(m.layer.H) * kHeadDim * 4);
      m.gate_ws_rows = rows;
    }
  }
  m.plans.clear();
  for (const auto& [key, policy] : m.plans.policies()) m.resolve(key, caches);
  if (needs.pending && m.on_cuda() && facts.rows_r > m.arrivals_n) {
    m.arrivals = m.backend->allocate(size_t(facts.rows_r) * 4);
    const std::vector<int32_t> zeros(size_t(facts.rows_r), 0);
    m.arrivals->upload(zeros.data(), zeros.size() * 4);
    m.arrivals_n = facts.rows_r;
  }
}

const Plan& PreparedKda::plan_for(const StepKey& key, const Caches& caches) {
  Impl& m = *impl_;
  validate::caches(caches, m.layer, validate::needs_of(key.mode));
  return m.resolve(key, caches);
}

void PreparedKda::run(const TensorView& projected, const TensorView& out, const Caches& caches, const StepArgs& args) {
  Impl& m = *impl_;
  const int64_t B = validate::step_rows(args.mode, args.q, validate::projected_rows(projected));
  const auto facts = validate::caches(caches, m.layer, validate::needs_of(args.mode));
  const Plan& plan = m.resolve({args.mode, int(B), args.q}, caches);
  const InputViews in = validate::projected_views(projected, plan.gate_mode, m.layer);
  m.step(in, out, caches, facts, args, B, plan, projected.strides[0]);
}

void PreparedKda::run_views(const InputViews& in, const TensorView& out, const Caches& caches, const StepArgs& args) {
  Impl& m = *impl_;
  const int64_t B = validate::step_rows(args.mode, args.q, validate::views_rows(in));
  const auto facts = validate::caches(caches, m.layer, validate::needs_of(args.mode));
  const Plan& plan = m.resolve({args.mode, int(B), args.q}, caches);
  m.step(in, out, caches, facts, args, B, plan, /*pitch_seen=*/-1);
}

void PreparedKda::commit(const Caches& caches, const TensorView& slots, const TensorView& record_rows,
                         const TensorView& counts, void* stream) {
  impl_->fold(caches, slots, record_rows, counts, /*flush=*/false, stream);
}

void PreparedKda::flush(const Caches& caches, const TensorView& slots, const TensorView& record_rows, void* stream) {
  impl_->fold(caches, slots, record_rows, TensorView{}, /*flush=*/true, stream);
}

Status PreparedKda::status(void* stream) { return impl_->backend->read_status(stream); }

int PreparedKda::heads() const { return impl_->layer.H; }
int PreparedKda::taps() const { return impl_->layer.W; }
Device PreparedKda::device() const { return impl_->backend->device(); }
const DeviceInfo& PreparedKda::device_info() const { return impl_->backend->info(); }

}  // namespace kda
