// src/plan.cpp — the planner: a pure host function from (step key, policy, layer, device)
// to a plan. See kda/plan.h; thresholds in kda/heuristics.h.
#include <sstream>
#include <stdexcept>

#include "kda/cuda/config.h"
#include "kda/heuristics.h"
#include "kda/plan.h"

namespace kda {

std::string Plan::describe() const {
  std::ostringstream os;
  os << key.describe() << " -> " << variant_name(variant) << " gate " << gate_mode_name(gate_mode)
     << " split " << split << " threads " << threads << " ctas " << ctas << " smem " << smem;
  if (variant == Variant::kWS) os << " items/cta " << items_per_cta;
  if (variant == Variant::kWS || variant == Variant::kWide || variant == Variant::kSplit) os << " stages " << ring_stages;
  if (variant == Variant::kWide || variant == Variant::kSplit) os << " ctas/sm " << ctas_per_sm;
  return os.str();
}

int choose_split(int64_t items, int sms) {
  int s = 1;
  while (s < heuristics::kMaxSplit && items * s < int64_t(heuristics::kSplitTargetCtasPerSm) * sms) s *= 2;
  return s;
}

Plan plan_step(const StepKey& key, const Policy& policy, const LayerShape& layer,
               const DeviceInfo& dev) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument("policy for step " + key.describe() + ": " + why);
  };
  if (key.q < 1 || key.q > kMaxQ)
    fail("q must be in [1, 16], got " + std::to_string(key.q));
  if ((key.mode == StepMode::kDecode || key.mode == StepMode::kAppend) && key.q != 1)
    fail(std::string(mode_name(key.mode)) + " steps have q = 1, got q = " + std::to_string(key.q));
  if (key.B < 0) fail("B must be >= 0, got " + std::to_string(key.B));

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
      fail(std::string("variant '") + variant_name(policy.variant) + "' needs the CUDA backend; the operands are on the CPU");
    plan.variant = Variant::kCpu;
    // The CPU backend computes one F_B pass per item; mode 1 is the same arithmetic.
    plan.gate_mode = gm == GateMode::kShared ? GateMode::kPerItem : gm;
    return plan;
  }

  // ---- CUDA ---------------------------------------------------------------------------
  if (layer.W != 4) fail("the CUDA kernels need W = 4 conv taps, the layer has W = " + std::to_string(layer.W));
  if (gm == GateMode::kShared)
    fail("gate mode 1 (shared) needs a variant that owns several requests of a head; none is built yet");
  plan.gate_mode = gm;

  const int64_t items = int64_t(key.B) * layer.H;
  // WS: a ring of >= 2 stages (state + operands) and the scratch within the opt-in limit
  const cuda_config::StreamSmem ss{key.q, layer.window, layer.conv_bytes, layer.state_bf16 ? 2 : 4,
                                   key.mode == StepMode::kFused};
  const cuda_config::WsSmem ws{ss};
  const int ws_stages = ws.stages_for(dev.smem_optin - 1024);  // 1 KiB: static smem (mbarriers)
  const bool ws_fits = layer.stream_ok && layer.window >= layer.W - 2 + key.q && ws_stages >= 2;
  const bool ws_mode = key.mode != StepMode::kAppend;  // WS has no append path
  Variant v = policy.variant;
  int split = 1;
  switch (v) {
    case Variant::kAuto:
      v = heuristics::auto_variant(items, key.mode);
      if (v == Variant::kWS && !(ws_fits && ws_mode)) v = Variant::kWide;
      if (v == Variant::kSplit) {
        if (!dev.clusters) v = Variant::kWide;
        else split = std::max(2, choose_split(items, dev.sms));
      }
      break;
    case Variant::kSplit:
      if (!dev.clusters) fail("variant 'split' needs thread-block clusters (sm_90 or newer)");
      split = std::max(2, choose_split(items, dev.sms));
      break;
    case Variant::kWide:
      split = 1;
      break;
    case Variant::kWS:
      if (!ws_mode) fail("variant 'ws' has no append path (use auto, split or wide)");
      if (!layer.stream_ok)
        fail("variant 'ws' needs 16-byte aligned operands (stream_layout): conv slot stride, SD column stride, "
             "dense DS windows, state slot stride, records rows");
      if (!ws_fits)
        fail("variant 'ws' needs two ring stages of " + std::to_string(ws.stage_size()) + " bytes plus " +
             std::to_string(ws.scratch_bytes()) + " bytes of scratch in shared memory, the device allows " +
             std::to_string(dev.smem_optin));
      break;
    default:
      fail(std::string("variant '") + variant_name(v) + "' is not built in this version (built: split, wide, ws)");
  }
  plan.variant = v;
  plan.split = split;
  if (v == Variant::kWS) {
    plan.threads = cuda_config::kWsThreads;
    plan.items_per_cta = std::max<int64_t>(1, (items + dev.sms - 1) / dev.sms);
    plan.ctas = (items + plan.items_per_cta - 1) / plan.items_per_cta;
    plan.ring_stages = ws_stages;
    plan.smem = ws.bytes(ws_stages);
    plan.fused_one_launch = true;
    return plan;
  }
  plan.threads = cuda_config::kStepThreads;
  const bool folds = key.mode == StepMode::kFused || key.mode == StepMode::kAppend;
  const int state_bytes = layer.state_bf16 ? 2 : 4, recs = folds ? layer.records : 0;
  plan.ctas = items * split;
  const heuristics::StepLayout lay =
      heuristics::step_layout(key.q, split, state_bytes, recs, dev.smem_per_sm, dev.smem_optin, plan.ctas, dev.sms);
  if (dev.smem_optin > 0 && lay.stages == 0)
    fail("needs " + std::to_string(cuda_config::StepSmem{key.q, split, 1, state_bytes, recs, 2 + key.q}.bytes()) +
         " bytes of shared memory, the device allows " + std::to_string(dev.smem_optin));
  plan.ring_stages = lay.stages;
  plan.ctas_per_sm = lay.ctas_per_sm;
  plan.smem = lay.smem;
  plan.fused_one_launch = true;
  return plan;
}

}  // namespace kda
