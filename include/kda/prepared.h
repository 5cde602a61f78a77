// kda/prepared.h — the public C++ API (SPEC §5): kda::PreparedKda.
//
//   kda::LayerWeights w{...};                       // views of the layer's weights
//   kda::PreparedKda kda(w, {{{StepMode::kDecode, 64, 1}, {}}}, /*conv_dim_first=*/false);
//   kda.prepare(caches);                            // plans every policy key, validates
//   kda.run(projected, out, caches, {slots});       // on the caller's stream, no allocation
//   kda::Status s = kda.status(stream);             // caller errors found in the data
//
// Errors in shapes, dtypes, strides, devices and arguments are thrown as kda::Error
// (kda/errors.h: DTypeError, ShapeError, LayoutError, DeviceError, ArgumentError, PlanError;
// all std::invalid_argument) whose message names the operand, what was expected and what
// came. Errors in the *data* (slot ids, accepted counts, pending counts) are flagged and read
// with status() (SPEC §4).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include "kda/errors.h"
#include "kda/helpers.h"
#include "kda/operands.h"
#include "kda/plan.h"
#include "kda/types.h"

namespace kda {

class Backend;  // CPU or CUDA implementation (src/)

/// The prepared KDA decode core of one layer (SPEC §5).
class PreparedKda {
 public:
  /// Validates the weights and derives the decode copies (conv [3, W, D] fp32, norm fp32) on
  /// the weights' device. `policies` maps step keys to policies; keys not listed are
  /// planned on first use from `default_policy`. `conv_dim_first`: true = DS conv layout
  /// [slots, 3D, window], false = SD [slots, window, 3D] (vLLM's default). `null_slot`:
  /// the pad slot id besides negatives (vLLM's NULL_BLOCK_ID = 0); -1 disables it.
  /// `weights.output_norm = false` builds the layer without the output norm (SPEC §9): out =
  /// bf16(o), norm_weight optional, out_gate optional in run_views (operands.h).
  /// Throws kda::Error on bad weights, a bad null_slot or a bad policy key.
  PreparedKda(const LayerWeights& weights, std::unordered_map<StepKey, Policy, StepKeyHash> policies = {},
              bool conv_dim_first = false, int null_slot = 0, Policy default_policy = {});
  ~PreparedKda();
  PreparedKda(const PreparedKda&) = delete;
  PreparedKda& operator=(const PreparedKda&) = delete;

  /// Validates the caches and plans every policy key for them. On CUDA it allocates what the
  /// plans need (kept and only grown, so captured graphs stay valid): the fused steps'
  /// arrival counters ([rows_r] int32) and the gate mode 1 workspace of the keys whose plan
  /// takes mode 1 ([B·q rounded up to 64, D] fp32). Steps in gate mode 1 share that workspace:
  /// run one PreparedKda on one stream at a time. A key that was not prepared is planned on
  /// first use with what was allocated (host work only): `auto` then runs gate mode 0 where
  /// the workspace does not hold the key; a forced mode 1 raises PlanError.
  void prepare(const Caches& caches);

  /// One step from the packed projection [rows, pitch] bf16 (SPEC §2): columns qkv [0,3D)
  /// · out_gate [3D,4D) · gate_in [4D,4D+R) (mode 2: [4D,5D)) · beta next · padding.
  /// rows = B·q. Writes out [rows, D] bf16 and the caches of the step kind. Launches on
  /// args.stream, allocates nothing, never synchronises.
  void run(const TensorView& projected, const TensorView& out, const Caches& caches, const StepArgs& args);

  /// As run, from four separate input views (vLLM's buffers), no copy. in.out_gate may be
  /// undefined when the layer has no output norm.
  void run_views(const InputViews& in, const TensorView& out, const Caches& caches, const StepArgs& args);

  /// Folds, per request b, the first counts[b] records of its row into its checkpoint
  /// state slots[b] (SPEC §4). record_rows optional (default: the checkpoint slot).
  void commit(const Caches& caches, const TensorView& slots, const TensorView& record_rows, const TensorView& counts,
              void* stream = nullptr);

  /// commit with counts = pending[row], then pending[row] = 0.
  void flush(const Caches& caches, const TensorView& slots, const TensorView& record_rows, void* stream = nullptr);

  /// Recomputes the derived conv/norm copies in place (same addresses: captured CUDA graphs
  /// stay valid). The borrowed weights must still live where they did; output_norm must be
  /// as at construction (captured launches carry it).
  void process_weights_after_loading(const LayerWeights& weights);

  /// Caller errors flagged since the last call; clears them. On CUDA it synchronises
  /// `stream` (only here).
  Status status(void* stream = nullptr);

  /// The plan for a key (planning it from the default policy if new), for inspection.
  /// Validates the caches as a step of that mode would.
  const Plan& plan_for(const StepKey& key, const Caches& caches);

  int heads() const;
  int taps() const;
  Device device() const;
  const DeviceInfo& device_info() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kda
