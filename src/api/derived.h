// src/api/derived.h — the weight copies PreparedKda owns (SPEC §5): the conv weight in the
// decode layout [3, W, D] fp32 and the norm weight in fp32, on the backend's device,
// recomputed in place on a reload (same addresses: captured CUDA graphs stay valid). Internal.
#pragma once

#include <memory>

#include "backend.h"
#include "kda/operands.h"

namespace kda::api {

class DerivedWeights {
 public:
  /// (Re)computes both copies from validated weights; allocates them the first time.
  void derive(Backend& backend, const LayerWeights& w);
  const float* conv_w() const { return static_cast<const float*>(conv_w_->data()); }
  const float* norm_w() const { return static_cast<const float*>(norm_w_->data()); }

 private:
  std::unique_ptr<Buffer> conv_w_, norm_w_;
};

}  // namespace kda::api
