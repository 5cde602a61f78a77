// kda/plan.h — the planning step (FlashMLA style: separate from the kernels). A plan is what
// `prepare` decides for one step key: the variant, its launch shape and shared memory, and
// the plan that runs instead when the step's inputs turn out unaligned. `plan_step` is a
// pure host function of the key, the policy, the layer and the device, unit-tested on the
// CPU; its thresholds live in kda/heuristics.h, the variants' requirements in src/plan/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kda/operands.h"
#include "kda/types.h"

namespace kda {

/// What the planner needs to know about the device (read once with cudaGetDeviceProperties;
/// a CPU "device" has sms = 0).
struct DeviceInfo {
  Device device = Device::kCPU;
  int sms = 0;                     ///< multiprocessors
  int cc_major = 0, cc_minor = 0;  ///< compute capability
  int64_t smem_optin = 0;          ///< max dynamic shared memory per block (bytes)
  int64_t smem_per_sm = 0;         ///< shared memory of one SM (bytes; 0 = unknown: smem_optin)
  bool clusters = false;           ///< thread-block clusters (sm_90+)
  int64_t dram_gbps = 0;           ///< peak DRAM bandwidth (GB/s; 0 = unknown)
  int64_t l2_bytes = 0;            ///< L2 cache (bytes; 0 = unknown)
};

/// The layer/cache facts a plan depends on.
struct LayerShape {
  int H = 0;
  int W = 4;
  bool state_bf16 = false;
  bool has_f_b = true;     ///< F_B given (gate modes 0, 1 possible)
  bool stream_ok = false;  ///< the caches allow 16-byte bulk copies (caches_aligned)
  int window = 0;          ///< conv window columns of the caches
  int conv_bytes = 2;      ///< 2 (bf16) or 4 (fp32) conv window elements
  int records = 0;         ///< Qr of the caches' records rows (0: no records)
  /// Rows of the gate mode 1 workspace the PreparedKda holds ([rows, D] fp32; CUDA): mode 1
  /// plans only keys whose B·q rows (padded to whole gate tiles) fit.
  int64_t gate_ws_rows = 0;
  bool operator==(const LayerShape&) const = default;
};

/// The layer facts of validated caches: window, element sizes and the alignment facts.
LayerShape layer_shape(int H, int W, bool has_f_b, const Caches& caches, bool conv_dim_first);

/// The alignment facts of the variant that copies with 16-byte bulk copies (WS): the
/// cache half, known at prepare (stream_layout of the caches, 16-byte aligned state and
/// records rows) ...
bool caches_aligned(const Caches& caches, bool conv_dim_first, int W);
/// ... and the run-time half: 16-byte aligned data and row strides of qkv, gate_in, out_gate.
bool inputs_aligned(const InputViews& in);

/// A decided plan for one step key.
struct Plan {
  StepKey key;
  Variant variant = Variant::kCpu;
  GateMode gate_mode = GateMode::kPerItem;  ///< resolved (never kAuto)
  int split = 1;                            ///< CTAs per item (Split: cluster size; Wide: 1)
  int threads = 0;                          ///< threads per CTA
  int64_t ctas = 0;                         ///< grid size (CTAs)
  int64_t smem = 0;                         ///< dynamic shared memory per CTA (bytes)
  int64_t pitch = 0;                        ///< packed pitch the plan was made for (0 = any)
  int64_t items_per_cta = 1;                ///< WS: items of one persistent CTA
  int ring_stages = 0;                      ///< WS: stages of the shared-memory ring; Split/Wide: state stages
  int ctas_per_sm = 0;                      ///< Split/Wide: CTAs per SM the kernel's registers are cut for
  int64_t gate_ws_rows = 0;                 ///< gate mode 1: workspace rows the step writes (0: no gate kernel)
  int gate_tile_rows = 0;                   ///< gate mode 1: step rows per gate-kernel CTA (16, 32 or 64)
  bool gate_ws_keep = false;                ///< gate mode 1: logits stored L2 evict-last (gate_logits_keep_in_l2)
  /// The variant copies the per-row inputs with 16-byte bulk copies: where a step's inputs
  /// are not aligned (inputs_aligned), `fallback` runs instead (host decision, graph-safe).
  bool needs_aligned_inputs = false;
  std::shared_ptr<const Plan> fallback;  ///< set exactly when needs_aligned_inputs

  /// The plan to launch for these inputs: this one, or its fallback.
  const Plan& for_inputs(const InputViews& in) const {
    return needs_aligned_inputs && !inputs_aligned(in) ? *fallback : *this;
  }
  std::string describe() const;
};

/// Plans one step key. Throws PlanError when a forced variant or gate mode cannot run this
/// key on this device (the message names the key and the reason), ArgumentError for a key
/// outside the contract (q outside [1, 16], decode with q != 1, B < 0).
Plan plan_step(const StepKey& key, const Policy& policy, const LayerShape& layer, const DeviceInfo& dev);

/// Split factor the heuristics choose for `items` = B·H items on `sms` multiprocessors
/// (1, 2, 4 or 8: the most CTAs per item that keep the grid within one CTA per SM, clusters of 4
/// and 8 within heuristics::kSplitClusterMaxCtas CTAs; a Split plan takes at least 2).
int choose_split(int64_t items, int sms);

}  // namespace kda
