// src/api/params.cpp — StepParams / CommitParams from validated operands (params.h).
#include "api/params.h"

#include <algorithm>
#include <climits>

namespace kda::api {
namespace {

const uint16_t* bf16_ptr(const TensorView& t) { return static_cast<const uint16_t*>(t.data); }
const int32_t* i32_ptr(const TensorView& t) { return static_cast<const int32_t*>(t.data); }
int64_t stride0(const TensorView& t) { return t.defined() ? t.strides[0] : 0; }

}  // namespace

StepParams step_params(const LayerParams& lp, const InputViews& in, const TensorView& out, const Caches& c,
                       const validate::CacheFacts& facts, const StepArgs& a, int64_t B, const Plan& plan) {
  const LayerWeights& w = *lp.weights;
  const validate::Layer& l = *lp.layer;
  const ModeTraits& mt = mode_traits(a.mode);
  StepParams p;
  p.mode = int(a.mode);
  p.B = int(B);
  p.q = a.q;
  p.H = l.H;
  p.W = l.W;
  p.gate_mode = int(plan.gate_mode);
  p.null_slot = lp.null_slot;
  p.has_lower_bound = w.lower_bound.has_value();
  p.lower_bound = w.lower_bound.value_or(0.f);
  p.eps = w.eps;
  p.output_norm = l.output_norm;
  // ---- inputs and out
  p.qkv = bf16_ptr(in.qkv);
  p.qkv_row = in.qkv.strides[0];
  p.out_gate = bf16_ptr(in.out_gate);  // nullptr without the output norm (never read)
  p.out_gate_row = stride0(in.out_gate);
  p.gate_in = bf16_ptr(in.gate_in);
  p.gate_in_row = in.gate_in.strides[0];
  p.beta = bf16_ptr(in.beta);
  p.beta_row = in.beta.strides[0];
  p.out = static_cast<uint16_t*>(out.data);
  p.out_row = out.strides[0];
  // ---- caches
  p.conv = c.conv_state.data;
  p.conv_f32 = c.conv_state.dtype == DType::kF32;
  p.window = int(facts.window);
  p.conv_slots = facts.conv_slots;
  p.conv_slot_stride = c.conv_state.strides[0];
  p.conv_chan_stride = facts.chan_stride;
  p.conv_col_stride = facts.col_stride;
  p.state = c.state.data;
  p.state_bf16 = c.state.dtype == DType::kBF16;
  p.state_slots = c.state.shape[0];
  p.state_slot_stride = c.state.strides[0];
  // ---- slot tensors
  const TensorView& sl = a.slots;
  p.slots = i32_ptr(sl);
  p.slots_stride0 = sl.strides[0];
  p.slots_stride1 = sl.ndim == 2 ? sl.strides[1] : 0;
  p.slots_cols = sl.ndim == 2 ? int(std::min<int64_t>(sl.shape[1], INT32_MAX)) : 1;
  p.out_slots = i32_ptr(a.out_slots);
  p.out_slots_stride = stride0(a.out_slots);
  p.accepted = i32_ptr(a.accepted);
  p.accepted_stride = stride0(a.accepted);
  p.record_rows = i32_ptr(a.record_rows);
  p.record_rows_stride = stride0(a.record_rows);
  if (mt.records) {
    p.correction = static_cast<float*>(c.correction.data);
    p.correction_row = c.correction.strides[0];
    p.key_gate = static_cast<float*>(c.key_gate.data);
    p.key_gate_row = c.key_gate.strides[0];
    p.record_rows_n = facts.rows_r;
    p.Qr = facts.Qr;
  }
  if (mt.pending) {
    p.pending = static_cast<int32_t*>(c.pending.data);
    p.pending_stride = c.pending.strides[0];
    p.arrivals = lp.arrivals;
  }
  // ---- weights, error slot, launch facts
  p.conv_w = lp.conv_w;
  p.conv_b = static_cast<const float*>(w.conv_bias.data);
  p.f_b = bf16_ptr(w.f_b_weight);
  p.f_b_row = stride0(w.f_b_weight);
  p.A_log = static_cast<const float*>(w.A_log.data);
  p.dt_bias = static_cast<const float*>(w.dt_bias.data);
  p.norm_w = lp.norm_w;
  p.error_flags = lp.error_flags;
  p.error_index = lp.error_index;
  if (plan.gate_mode == GateMode::kShared) {
    p.gate_ws = lp.gate_ws;
    p.gate_ws_row = int64_t(l.H) * kHeadDim;
    p.gate_tile_rows = plan.gate_tile_rows;
    p.gate_ws_keep = plan.gate_ws_keep;
  }
  p.items_per_cta = plan.items_per_cta;
  p.ring_stages = plan.ring_stages;
  p.conv_dim_first = l.conv_dim_first;
  return p;
}

CommitParams commit_params(const LayerParams& lp, const Caches& c, const validate::CacheFacts& facts,
                           const TensorView& slots, const TensorView& record_rows, const TensorView& counts,
                           int64_t B) {
  const bool flush = !counts.defined();
  CommitParams p;
  p.B = int(B);
  p.H = lp.layer->H;
  p.null_slot = lp.null_slot;
  p.slots = i32_ptr(slots);
  p.slots_stride0 = slots.strides[0];
  p.record_rows = i32_ptr(record_rows);
  p.record_rows_stride = stride0(record_rows);
  p.counts = i32_ptr(counts);
  p.counts_stride = stride0(counts);
  p.state = c.state.data;
  p.state_bf16 = c.state.dtype == DType::kBF16;
  p.state_slots = c.state.shape[0];
  p.state_slot_stride = c.state.strides[0];
  p.correction = static_cast<const float*>(c.correction.data);
  p.correction_row = c.correction.strides[0];
  p.key_gate = static_cast<const float*>(c.key_gate.data);
  p.key_gate_row = c.key_gate.strides[0];
  p.record_rows_n = facts.rows_r;
  p.Qr = facts.Qr;
  if (flush) {
    p.pending = static_cast<int32_t*>(c.pending.data);
    p.pending_stride = c.pending.strides[0];
    p.arrivals = lp.arrivals;
  }
  p.error_flags = lp.error_flags;
  p.error_index = lp.error_index;
  return p;
}

}  // namespace kda::api
