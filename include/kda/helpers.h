// kda/helpers.h — the helpers of SPEC §5: the decode conv layout, the streaming variant's
// alignment and grid rules, and what the fused verify supports.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kda/types.h"

namespace kda {

/// nn.Conv1d depthwise weight [3D, 1, W] (fp32 or bf16, any strides, host memory) ->
/// decode layout [3, W, D] fp32, dense: out[s][j][c] = w[s·D + c][0][j].
/// Throws DTypeError / ShapeError / DeviceError naming "conv_weight".
std::vector<float> decode_conv_weight(const TensorView& w);

/// Operand description for stream_layout (only alignment facts matter).
struct StreamOperands {
  TensorView conv_state;
  TensorView state;
  bool conv_dim_first = false;
  int64_t input_row_stride_bytes = 0;  ///< packed pitch (or the views' row strides) in bytes
  int64_t out_row_stride_bytes = 0;
  int W = 4;
};
struct StreamLayout {
  bool dim_first = false;
  int64_t window = 0;
};
/// Can the streaming variant use 16-byte async copies for these operands? 16-byte aligned
/// row strides, conv slot stride and SD channel stride, and window >= W-2+q.
std::optional<StreamLayout> stream_layout(const StreamOperands& ops, int q);

/// Persistent CTAs for `items` items on `sms` SMs: two per SM, equal share:
/// per = ceil(items / (2·sms)), ctas = ceil(items / per).
int64_t stream_ctas(int64_t items, int sms);

/// Can the fused verify fold this layer's records? (VK-dense fp32 or bf16 state; any gate.)
bool deferred_supported(const TensorView& state, std::optional<float> lower_bound);

/// Does a fused step of this shape run a fused variant (else flush + record verify)?
bool replays(int H, int B, int q);

}  // namespace kda
