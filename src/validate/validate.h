// src/validate/validate.h — the one validator of kda-decode: every host-side check of the
// operands of a layer, a step, a commit and a flush (SPEC §2, §4, §5), in one place, run
// once per call. The Python package and the bindings only convert types; everything else is
// checked here and thrown as the typed kda::Error of kda/errors.h. Internal.
//
//   layer.cpp  the weights, null_slot, policy keys and the caches
//   step.cpp   the step key, the rows, the input views and out, the slot tensors, the
//              window and records each key needs, commit / flush arguments
#pragma once

#include <cstdint>
#include <unordered_map>

#include "kda/operands.h"
#include "kda/plan.h"
#include "kda/types.h"
#include "validate/expect.h"

namespace kda::validate {

/// The facts of a layer that every check compares against (from its validated weights).
struct Layer {
  int H = 0, W = 0;
  int64_t D = 0;
  Place place;  ///< the weights' device: every operand must be there
  bool conv_dim_first = false;
  bool has_f_b = false;
  bool has_conv_bias = false;
  bool output_norm = true;  ///< false: out = bf16(o); norm_weight and out_gate optional (SPEC §9)
};

/// What a use of the caches needs besides conv_state and state.
struct CacheNeeds {
  bool records = false;  ///< correction and key_gate
  bool pending = false;
};

/// The facts of validated caches.
struct CacheFacts {
  int64_t conv_slots = 0, window = 0, chan_stride = 0, col_stride = 0;
  int64_t rows_r = 0;  ///< records rows (0 without records)
  int Qr = 0;          ///< record positions per row (0 without records)
};

// ---- layer.cpp ----------------------------------------------------------------------------
/// The weights of a new layer; returns its facts.
Layer weights(const LayerWeights& w, bool conv_dim_first);
/// The weights of a reload (process_weights_after_loading): as `weights`, and H, W, the
/// set of optional weights and output_norm as at construction.
void reload(const LayerWeights& w, const Layer& layer);
void null_slot(int null_slot);
/// Every policy key (q in [1, 16], q = 1 where the mode is single-token, B >= 0) and every
/// policy's pitch (>= 0).
void policies(const std::unordered_map<StepKey, Policy, StepKeyHash>& policies, const Policy& default_policy);
/// The caches for a use that needs `needs`.
CacheFacts caches(const Caches& c, const Layer& layer, CacheNeeds needs);
/// What the caches of a step of this mode must hold.
CacheNeeds needs_of(StepMode mode);

// ---- step.cpp -----------------------------------------------------------------------------
/// How a step key falls outside the contract: the one rule behind step_key and policy_keys
/// (step_rows checks the same q rule before B is known).
enum class KeyProblem { kNone, kQRange, kSingleToken, kNegativeB };
KeyProblem key_problem(const StepKey& key);
/// Throws PlanError naming the key when key_problem() finds one (plan_step).
void step_key(const StepKey& key);
/// q and mode of a step with `rows` input rows; returns B = rows / q.
int64_t step_rows(StepMode mode, int q, int64_t rows);
/// The caches fit the key: window >= W - 2 + q, and Qr >= q where the mode records.
void key_fits(const StepKey& key, const CacheFacts& facts, const Layer& layer);
/// The packed projection [rows, pitch]: given, bf16, rank 2, unit inner stride; returns rows.
int64_t projected_rows(const TensorView& projected);
/// The four views of run_views: qkv given and of rank 2 (inputs() checks the rest); returns rows.
int64_t views_rows(const InputViews& in);
/// At least the columns of `gate_mode`, row pitch >= columns; returns the four views sliced
/// from the packed projection.
InputViews projected_views(const TensorView& projected, GateMode gate_mode, const Layer& layer);
/// The four input views and out, for a plan (gate_in width of its gate mode, the policy's
/// pitch when `pitch_seen` >= 0, i.e. the packed path). out_gate may be undefined when the
/// layer has no output norm (a given one is checked all the same).
void inputs(const InputViews& in, const TensorView& out, const Plan& plan, const Layer& layer, int64_t pitch_seen);
/// slots, accepted, out_slots and record_rows of a step of B requests.
void step_args(const StepArgs& a, int64_t B, const Layer& layer);
/// A fused step or flush on CUDA uses one arrival counter per records row, allocated by
/// prepare(caches): the records may not have more rows than were prepared.
void arrivals(const CacheFacts& facts, int64_t prepared_rows);
/// slots, record_rows and (commit) counts of commit / flush; returns B.
int64_t fold_args(const TensorView& slots, const TensorView& record_rows, const TensorView& counts, bool flush,
                  const Layer& layer);

}  // namespace kda::validate
