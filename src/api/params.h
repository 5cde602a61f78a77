// src/api/params.h — fills the POD parameter blocks every backend reads (kda/params.h) from
// validated operands. No checks here: the validator (src/validate) has run. Internal.
#pragma once

#include <cstdint>

#include "kda/operands.h"
#include "kda/params.h"
#include "kda/plan.h"
#include "validate/validate.h"

namespace kda::api {

/// The layer as the kernels see it: its weights, the copies PreparedKda owns and the
/// backend's error slot and arrival counters.
struct LayerParams {
  const LayerWeights* weights = nullptr;
  const validate::Layer* layer = nullptr;
  int null_slot = 0;
  const float* conv_w = nullptr;  ///< derived [3, W, D] fp32
  const float* norm_w = nullptr;  ///< derived [K] fp32
  uint32_t* error_flags = nullptr;
  int32_t* error_index = nullptr;
  int32_t* arrivals = nullptr;  ///< [rows_r] (CUDA, modes that read pending; else null)
  float* gate_ws = nullptr;     ///< gate mode 1 workspace [rows, D] fp32 (CUDA; else null)
};

/// One step of B requests with `plan` (the plan that launches: Plan::for_inputs).
StepParams step_params(const LayerParams& lp, const InputViews& in, const TensorView& out, const Caches& c,
                       const validate::CacheFacts& facts, const StepArgs& a, int64_t B, const Plan& plan);

/// commit (counts given) or flush (counts undefined: fold pending, then zero it).
CommitParams commit_params(const LayerParams& lp, const Caches& c, const validate::CacheFacts& facts,
                           const TensorView& slots, const TensorView& record_rows, const TensorView& counts, int64_t B);

}  // namespace kda::api
