// src/plan/plan.cpp — the planner: a pure host function from (step key, policy, layer,
// device) to a plan (kda/plan.h). Thresholds in kda/heuristics.h.
//
// kVariants below is the one place that knows what each CUDA variant needs (clusters,
// 16-byte aligned caches and inputs), how it is launched, and what runs instead where it
// cannot: `auto` walks the fallback chain, a forced variant raises PlanError with the
// reason, and a variant that needs aligned inputs carries its fallback plan for steps
// whose inputs are not (Plan::for_inputs).
#include <algorithm>
#include <sstream>

#include "kda/cuda/config.h"
#include "kda/errors.h"
#include "kda/heuristics.h"
#include "kda/plan.h"
#include "plan/counters.h"
#include "validate/validate.h"

namespace kda {
namespace {

enum Needs : unsigned {
  kClusters = 1u << 0,       ///< thread-block clusters (sm_90+)
  kAlignedCaches = 1u << 1,  ///< LayerShape::stream_ok: caches_aligned()
  kAlignedInputs = 1u << 2,  ///< inputs_aligned() at run time, else Plan::fallback
};

/// Static shared memory of the WS kernel (mbarriers): headroom below the device's opt-in
/// limit.
constexpr int64_t kStaticSmem = 1024;

struct Context {
  const StepKey& key;
  const LayerShape& layer;
  const DeviceInfo& dev;
  NarrowForm narrow = NarrowForm::kAuto;  ///< the policy's (heuristics::narrow_step)
  int64_t items() const { return int64_t(key.B) * layer.H; }
  cuda_config::StreamSmem stream_smem() const {
    return {key.q, layer.window, layer.conv_bytes, layer.state_bf16 ? 2 : 4,
            key.mode == StepMode::kFused ? int(layer.records) : 0};
  }
  bool window_fits() const { return layer.window >= layer.W - 2 + key.q; }
  /// The step folds pending records (fused, append): Split/Wide stage them.
  bool folds() const { return mode_traits(key.mode).pending; }
};

/// Fills the launch shape of `plan`; returns "" or why the variant cannot run the key.
using ShapeFn = std::string (*)(const Context&, Plan&);

std::string split_shape(const Context& c, Plan& p, int split) {
  p.split = split;
  p.threads = cuda_config::kStepThreads;
  const int q = c.key.q, state_bytes = c.layer.state_bf16 ? 2 : 4, recs = c.folds() ? c.layer.records : 0;
  p.ctas = c.items() * split;
  const bool lean_q1 = q == 1 && split == 1 && p.gate_mode != GateMode::kPerItem;
  // the narrow form (cuda_config::narrow_form) by heuristics::narrow_step or as the policy asks beyond one wave of
  // six CTAs per SM, where its layout puts more than four CTAs on an SM (the dispatch's test: plan.threads)
  const bool narrow = lean_q1 &&
                      cuda_config::narrow_form(split, q, state_bytes, cuda_config::stores_updated_rows(c.key.mode)) &&
                      (c.narrow == NarrowForm::kOn     ? heuristics::narrow_grid(p.ctas, c.dev.sms)
                       : c.narrow == NarrowForm::kAuto ? heuristics::narrow_step(p.ctas, c.dev.sms, c.dev.dram_gbps)
                                                       : false);
  const int prefer = lean_q1 && c.layer.state_bf16                ? heuristics::kStepBf16Q1CtasPerSm
                     : lean_q1 && c.key.mode == StepMode::kAppend ? heuristics::kStepF32AppendCtasPerSm
                     : cuda_config::is_split_verify(split, q)     ? cuda_config::kSmallGridVerifyCtasPerSm
                     : split > 1 && q == 1                        ? cuda_config::split_q1_min_blocks(split, state_bytes)
                     : q != 1
                         ? heuristics::wide_verify_ctas_per_sm(c.key.mode, q, c.layer.state_bf16,
                                                               p.gate_mode == GateMode::kPerItem, p.ctas, c.dev.sms)
                         : heuristics::kStepCtasPerSm;
  const int64_t stage_bytes = heuristics::step_stage_bytes(c.key.mode == StepMode::kDecode,
                                                           p.gate_mode == GateMode::kPerItem, p.ctas, c.dev.sms);
  heuristics::StepLayout lay{};
  if (narrow) {
    lay = heuristics::step_layout(q, split, state_bytes, recs, c.dev.smem_per_sm, c.dev.smem_optin, p.ctas, c.dev.sms,
                                  cuda_config::kNarrowCtasPerSm, heuristics::narrow_stage_bytes(state_bytes),
                                  cuda_config::kNarrowThreads);
    if (lay.ctas_per_sm > 4) p.threads = cuda_config::kNarrowThreads;
  }
  if (p.threads != cuda_config::kNarrowThreads)
    lay = heuristics::step_layout(q, split, state_bytes, recs, c.dev.smem_per_sm, c.dev.smem_optin, p.ctas, c.dev.sms,
                                  prefer, stage_bytes);
  if (c.dev.smem_optin > 0 && lay.stages == 0)
    return "needs " + std::to_string(cuda_config::StepSmem{q, split, 1, state_bytes, recs, 2 + q}.bytes()) +
           " bytes of shared memory, the device allows " + std::to_string(c.dev.smem_optin);
  p.ring_stages = lay.stages;
  p.ctas_per_sm = lay.ctas_per_sm;
  p.smem = lay.smem;
  return "";
}

std::string shape_split(const Context& c, Plan& p) {
  return split_shape(c, p, std::max(2, choose_split(c.items(), c.dev.sms)));
}

std::string shape_wide(const Context& c, Plan& p) { return split_shape(c, p, 1); }

std::string shape_ws(const Context& c, Plan& p) {
  const cuda_config::WsSmem ws{c.stream_smem()};
  const int stages = ws.stages_for(c.dev.smem_optin - kStaticSmem);
  if (!c.window_fits() || stages < 2)
    return "needs two ring stages of " + std::to_string(ws.stage_size()) + " bytes plus " +
           std::to_string(ws.scratch_bytes()) + " bytes of scratch in shared memory, the device allows " +
           std::to_string(c.dev.smem_optin);
  p.threads = cuda_config::kWsThreads;
  p.items_per_cta = std::max<int64_t>(1, (c.items() + c.dev.sms - 1) / c.dev.sms);
  p.ctas = (c.items() + p.items_per_cta - 1) / p.items_per_cta;
  p.ring_stages = stages;
  p.smem = ws.bytes(stages);
  return "";
}

/// Step modes as a bit mask (1 << StepMode).
constexpr unsigned mode_bit(StepMode m) { return 1u << unsigned(m); }
constexpr unsigned kAllModes = ~0u;
/// WS runs the modes it was written for; append (fold without write-back) is Split/Wide's.
constexpr unsigned kWsModes = mode_bit(StepMode::kDecode) | mode_bit(StepMode::kPerToken) |
                              mode_bit(StepMode::kRecord) | mode_bit(StepMode::kFused);

struct VariantSpec {
  Variant variant;
  unsigned modes;    ///< the step modes it runs (mode_bit)
  unsigned needs;    ///< Needs
  Variant fallback;  ///< what `auto` runs where this one cannot (kAuto: none), and the aligned-inputs fallback
  ShapeFn shape;
};

/// The CUDA variants. To add one: a row here (the modes it runs, its needs, fallback and
/// launch shape), its kernel dispatch in src/cuda/cuda_backend.cu, and where `auto` should
/// pick it, a rule in kda/heuristics.h.
constexpr VariantSpec kVariantSpecs[] = {
    {Variant::kSplit, kAllModes, kClusters, Variant::kWide, shape_split},
    {Variant::kWide, kAllModes, 0, Variant::kAuto, shape_wide},
    {Variant::kWS, kWsModes, kAlignedCaches | kAlignedInputs, Variant::kWide, shape_ws},
};

const VariantSpec* find_spec(Variant v) {
  for (const VariantSpec& s : kVariantSpecs)
    if (s.variant == v) return &s;
  return nullptr;
}

std::string built_names() {
  std::string s;
  for (const VariantSpec& v : kVariantSpecs) s += (s.empty() ? "" : ", ") + std::string(variant_name(v.variant));
  return s;
}

/// Why `spec`'s needs are not met here ("" when they are).
std::string unmet_needs(const VariantSpec& spec, const Context& c) {
  const std::string name = std::string("variant '") + variant_name(spec.variant) + "'";
  if (!(spec.modes & mode_bit(c.key.mode))) return name + " has no " + mode_name(c.key.mode) + " path";
  if ((spec.needs & kClusters) && !c.dev.clusters) return name + " needs thread-block clusters (sm_90 or newer)";
  if ((spec.needs & kAlignedCaches) && !c.layer.stream_ok)
    return name +
           " needs 16-byte aligned operands (stream_layout): conv slot stride, SD column stride, dense DS windows, "
           "state slot stride, records rows";
  return "";
}

/// Plans `v` for the CUDA device; `forced`: raise where it cannot run, else walk its fallbacks.
Plan plan_cuda(const Context& c, Plan plan, Variant v, bool forced) {
  for (;;) {
    const VariantSpec* spec = find_spec(v);
    if (!spec)
      throw PlanError(c.key.describe(), std::string("variant '") + variant_name(v) +
                                            "' is not built in this version (built: " + built_names() + ")");
    Plan p = plan;
    p.variant = v;
    std::string why = unmet_needs(*spec, c);
    if (why.empty()) {
      why = spec->shape(c, p);
      if (!why.empty()) why = std::string("variant '") + variant_name(v) + "' " + why;
    }
    if (why.empty()) {
      if (spec->needs & kAlignedInputs) {
        p.needs_aligned_inputs = true;
        p.fallback = std::make_shared<const Plan>(plan_cuda(c, plan, spec->fallback, /*forced=*/true));
      }
      return p;
    }
    if (forced || spec->fallback == Variant::kAuto) throw PlanError(c.key.describe(), why);
    v = spec->fallback;
  }
}

}  // namespace

std::string Plan::describe() const {
  std::ostringstream os;
  os << key.describe() << " -> " << variant_name(variant) << " gate " << gate_mode_name(gate_mode) << " split " << split
     << " threads " << threads << " ctas " << ctas << " smem " << smem;
  if (variant == Variant::kWS) os << " items/cta " << items_per_cta;
  if (variant == Variant::kWS || variant == Variant::kWide || variant == Variant::kSplit)
    os << " stages " << ring_stages;
  if (variant == Variant::kWide || variant == Variant::kSplit) os << " ctas/sm " << ctas_per_sm;
  if (gate_ws_rows > 0)
    os << " gate rows " << gate_ws_rows << " per cta " << gate_tile_rows << (gate_ws_keep ? " kept in L2" : "");
  if (fallback) os << " (unaligned inputs: " << variant_name(fallback->variant) << ")";
  return os.str();
}

int choose_split(int64_t items, int sms) {
  int s = 1;
  while (s < heuristics::kMaxSplit && items * s * 2 <= int64_t(sms) * heuristics::kSplitCtasPerSm &&
         (s * 2 < 4 || items * s * 2 <= heuristics::kSplitClusterMaxCtas))
    s *= 2;
  return s;
}

Plan plan_step(const StepKey& key, const Policy& policy, const LayerShape& layer, const DeviceInfo& dev) {
  ++counters::planner_calls;
  validate::step_key(key);
  auto fail = [&](const std::string& why) { throw PlanError(key.describe(), why); };

  Plan plan;
  plan.key = key;
  plan.pitch = policy.pitch;

  // ---- gate mode ----------------------------------------------------------------------
  GateMode gm = policy.gate_mode;
  if (gm == GateMode::kAuto) gm = layer.has_f_b ? GateMode::kPerItem : GateMode::kPrecomputed;
  if ((gm == GateMode::kPerItem || gm == GateMode::kShared) && !layer.has_f_b)
    fail(std::string("gate mode ") + gate_mode_name(gm) + " needs f_b_weight, which the layer was built without");

  if (dev.device == Device::kCPU) {
    if (policy.variant != Variant::kAuto && policy.variant != Variant::kCpu)
      fail(std::string("variant '") + variant_name(policy.variant) +
           "' needs the CUDA backend; the operands are on the CPU");
    plan.variant = Variant::kCpu;
    // The CPU backend computes one F_B pass per item; mode 1 is the same arithmetic.
    plan.gate_mode = gm == GateMode::kShared ? GateMode::kPerItem : gm;
    return plan;
  }

  // ---- CUDA ---------------------------------------------------------------------------
  if (layer.W != 4) fail("the CUDA kernels need W = 4 conv taps, the layer has W = " + std::to_string(layer.W));
  const Context ctx{key, layer, dev, policy.narrow};
  const bool forced = policy.variant != Variant::kAuto;
  // Gate mode 1: the gate kernel writes the step's logits into the workspace that prepare()
  // sized for the policy keys; `auto` takes it where the heuristics say it pays and the
  // workspace holds the step, and runs its gate on Split / Wide.
  // NOTES: SPEC §8 holds commit(n) after a record step bitwise equal to the per-token state
  // after n tokens within one forced variant. Gate modes 0 and 1 sum the logits in different
  // orders (their gates differ in the last bits), so under a forced variant a per_token step
  // takes the record step's gate rule: mode 1 at q = 1 from 6144 items too, where `auto` keeps
  // per_token in mode 0 (its own measured pick; with q ≥ 2 the two rules agree). Under the
  // automatic variant the two kinds may run different variants anyway.
  const StepMode gate_kind = forced && key.mode == StepMode::kPerToken ? StepMode::kRecord : key.mode;
  const int64_t ws_rows = cuda_config::gate_ws_rows(int64_t(key.B) * key.q);
  if (gm == GateMode::kPerItem && policy.gate_mode == GateMode::kAuto && ws_rows <= layer.gate_ws_rows &&
      !(forced && policy.variant == Variant::kWS) &&
      heuristics::auto_shared_gate(ctx.items(), gate_kind, key.q, layer.state_bf16))
    gm = GateMode::kShared;
  if (gm == GateMode::kShared) {
    if (forced && policy.variant == Variant::kWS)
      fail("variant 'ws' reads its gate input through its ring in bf16; gate mode 1 (shared) runs on split and wide");
    if (ws_rows > layer.gate_ws_rows)
      fail("gate mode 1 (shared) needs a workspace of " + std::to_string(ws_rows) +
           " rows of fp32 gate logits; prepare() sizes it for the keys of the policies (it holds " +
           std::to_string(layer.gate_ws_rows) + "): add this key to the policies and prepare again");
    plan.gate_ws_rows = ws_rows;
    plan.gate_tile_rows = heuristics::gate_tile_rows(layer.H, int64_t(key.B) * key.q);
    plan.gate_ws_keep = heuristics::gate_logits_keep_in_l2(
        int64_t(key.B) * key.q * layer.H * kHeadDim * int64_t(sizeof(float)), dev.l2_bytes);
  }
  plan.gate_mode = gm;
  const Variant v = forced ? policy.variant
                    : gm == GateMode::kPerItem
                        ? heuristics::auto_variant(ctx.items(), key.mode, key.q, layer.state_bf16)
                        : heuristics::auto_variant_without_fb(ctx.items(), key.mode, key.q, layer.state_bf16);
  return plan_cuda(ctx, plan, v, forced);
}

}  // namespace kda
