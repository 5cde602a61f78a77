// kda/plan.h — the planning step (FlashMLA style: separate from the kernels). A plan is what
// `prepare` decides for one step key: the variant, its launch shape and shared memory.
// `plan_step` is a pure host function of the key, the policy, the layer and the device,
// unit-tested on the CPU; its thresholds live in kda/heuristics.h.
#pragma once

#include <cstdint>
#include <string>

#include "kda/types.h"

namespace kda {

/// What the planner needs to know about the device (read once with cudaGetDeviceProperties;
/// a CPU "device" has sms = 0).
struct DeviceInfo {
  Device device = Device::kCPU;
  int sms = 0;                    ///< multiprocessors
  int cc_major = 0, cc_minor = 0; ///< compute capability
  int64_t smem_optin = 0;         ///< max dynamic shared memory per block (bytes)
  int64_t smem_per_sm = 0;        ///< shared memory of one SM (bytes; 0 = unknown: smem_optin)
  bool clusters = false;          ///< thread-block clusters (sm_90+)
};

/// The layer/cache facts a plan depends on.
struct LayerShape {
  int H = 0;
  int W = 4;
  bool state_bf16 = false;
  bool has_f_b = true;  ///< F_B given (gate modes 0, 1 possible)
  bool stream_ok = false;  ///< stream_layout() accepted the caches (16-byte async copies)
  int window = 0;          ///< conv window columns of the caches
  int conv_bytes = 2;      ///< 2 (bf16) or 4 (fp32) conv window elements
  int records = 0;         ///< Qr of the caches' records rows (0: no records)
};

/// A decided plan for one step key.
struct Plan {
  StepKey key;
  Variant variant = Variant::kCpu;
  GateMode gate_mode = GateMode::kPerItem;  ///< resolved (never kAuto)
  int split = 1;          ///< CTAs per item (Split: cluster size; Wide: 1)
  int threads = 0;        ///< threads per CTA
  int64_t ctas = 0;       ///< grid size (CTAs)
  int64_t smem = 0;       ///< dynamic shared memory per CTA (bytes)
  int64_t pitch = 0;      ///< packed pitch the plan was made for (0 = any)
  int64_t items_per_cta = 1;     ///< Stream / WS: items of one persistent CTA
  int ring_stages = 0;           ///< WS: stages of the shared-memory ring; Split/Wide: state stages
  int ctas_per_sm = 0;           ///< Split/Wide: CTAs per SM the kernel's registers are cut for
  bool fused_one_launch = true;  ///< fused mode runs in one launch (else flush + record)
  std::string describe() const;
};

/// Plans one step key. Throws std::invalid_argument when a forced variant or gate mode
/// cannot run this key on this device (the message names the key and the reason).
Plan plan_step(const StepKey& key, const Policy& policy, const LayerShape& layer,
               const DeviceInfo& dev);

/// Split factor the heuristics choose for `items` = B·H items on `sms` multiprocessors
/// (1, 2, 4 or 8: enough CTAs to fill the GPU twice over).
int choose_split(int64_t items, int sms);

}  // namespace kda
