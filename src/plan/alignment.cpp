// src/plan/alignment.cpp — the layer facts a plan depends on, and the alignment facts of the
// variants that copy with 16-byte bulk copies (kda/plan.h). Where these do not hold, the
// planner picks (or the plan falls back to) a variant that does not need them.
#include <cstdint>

#include "kda/helpers.h"
#include "kda/plan.h"

namespace kda {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool caches_aligned(const Caches& c, bool conv_dim_first, int W) {
  StreamOperands ops;
  ops.conv_state = c.conv_state;
  ops.state = c.state;
  ops.conv_dim_first = conv_dim_first;
  ops.W = W;
  if (!stream_layout(ops, 1) || !aligned16(c.state.data)) return false;
  // records rows are copied in 16-byte pieces too (fused mode)
  for (const TensorView* r : {&c.correction, &c.key_gate})
    if (r->defined() && (!aligned16(r->data) || (r->strides[0] * 4) % 16)) return false;
  return true;
}

bool inputs_aligned(const InputViews& in) {
  // out is written with plain stores; beta is read per row
  for (const TensorView* t : {&in.qkv, &in.gate_in, &in.out_gate})
    if (!aligned16(t->data) || (t->strides[0] * 2) % 16) return false;
  return true;
}

LayerShape layer_shape(int H, int W, bool has_f_b, const Caches& c, bool conv_dim_first) {
  LayerShape ls;
  ls.H = H;
  ls.W = W;
  ls.has_f_b = has_f_b;
  ls.state_bf16 = c.state.dtype == DType::kBF16;
  const TensorView& cs = c.conv_state;
  ls.window = int(conv_dim_first ? cs.shape[2] : cs.shape[1]);
  ls.conv_bytes = int(dtype_size(cs.dtype));
  ls.records = c.correction.defined() && c.correction.ndim == 4 ? int(c.correction.shape[2]) : 0;
  ls.stream_ok = caches_aligned(c, conv_dim_first, W);
  return ls;
}

}  // namespace kda
