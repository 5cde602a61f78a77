// src/validate/layer.cpp — the validator's layer half: weights, null_slot, policy keys and
// caches (validate.h).
#include <string>

#include "validate/validate.h"

namespace kda::validate {
namespace {

constexpr int K = kHeadDim;

void check_weights(const LayerWeights& lw, int64_t d, Place place) {
  const TensorView& cw = lw.conv_weight;
  expect_defined(cw, "conv_weight", "[3D, 1, W]");
  expect_dtype(cw, "conv_weight", {DType::kF32, DType::kBF16});
  expect_rank(cw, "conv_weight", 3, "[3D, 1, W]");
  expect_dim(cw, "conv_weight", 0, 3 * d, "3·D = 3·128·H");
  expect_dim(cw, "conv_weight", 1, 1, "depthwise in-channels");
  if (cw.shape[2] < 2) throw ShapeError("conv_weight", "W >= 2 taps", std::to_string(cw.shape[2]));
  expect_device(cw, "conv_weight", place);

  expect_defined(lw.dt_bias, "dt_bias", "[D] fp32");
  expect_dtype(lw.dt_bias, "dt_bias", {DType::kF32});
  expect_rank(lw.dt_bias, "dt_bias", 1, "[D]");
  expect_dim(lw.dt_bias, "dt_bias", 0, d, "D = 128·H");
  expect_unit_inner(lw.dt_bias, "dt_bias");
  expect_device(lw.dt_bias, "dt_bias", place);

  if (const TensorView& fb = lw.f_b_weight; fb.defined()) {
    expect_dtype(fb, "f_b_weight", {DType::kBF16});
    expect_rank(fb, "f_b_weight", 2, "[D, R]");
    expect_dim(fb, "f_b_weight", 0, d, "D = 128·H");
    expect_dim(fb, "f_b_weight", 1, kRank, "R = 128");
    expect_unit_inner(fb, "f_b_weight");
    expect_device(fb, "f_b_weight", place);
    if (place.device == Device::kCUDA) {
      expect_aligned(fb.data, 16, "f_b_weight");
      if (fb.strides[0] % 8)
        throw LayoutError("f_b_weight", "a row stride that is a multiple of 8 elements (16 bytes) on CUDA",
                          std::to_string(fb.strides[0]));
    }
  }
  if (const TensorView& cb = lw.conv_bias; cb.defined()) {
    expect_dtype(cb, "conv_bias", {DType::kF32});
    expect_rank(cb, "conv_bias", 1, "[3D]");
    expect_dim(cb, "conv_bias", 0, 3 * d, "3·D");
    expect_unit_inner(cb, "conv_bias");
    expect_device(cb, "conv_bias", place);
  }
  // Without the output norm (SPEC §9) the norm weight is never used: optional, checked when given.
  const TensorView& nw = lw.norm_weight;
  if (lw.output_norm || nw.defined()) {
    expect_defined(nw, "norm_weight", "[K] float for the output norm; output_norm=false builds without it");
    expect_dtype(nw, "norm_weight", {DType::kF32, DType::kBF16, DType::kF16, DType::kF64});
    expect_rank(nw, "norm_weight", 1, "[K]");
    expect_dim(nw, "norm_weight", 0, K, "K = 128");
    expect_device(nw, "norm_weight", place);
  }
  if (!(lw.eps > 0.f)) throw ArgumentError("eps", "a positive RMSNorm epsilon", std::to_string(lw.eps));
  if (lw.lower_bound && !(*lw.lower_bound >= -5.f && *lw.lower_bound < 0.f))
    throw ArgumentError("lower_bound", "none or a value in [-5, 0)", std::to_string(*lw.lower_bound));
}

/// A_log fixes H and the device; every other weight must agree with it.
int check_a_log(const TensorView& a) {
  expect_defined(a, "A_log", "[H] fp32");
  expect_dtype(a, "A_log", {DType::kF32});
  expect_rank(a, "A_log", 1, "[H]");
  expect_unit_inner(a, "A_log");
  const int64_t h = a.shape[0];
  if (h < 1) throw ShapeError("A_log", "H >= 1 heads", std::to_string(h));
  return int(h);
}

}  // namespace

Layer weights(const LayerWeights& w, bool conv_dim_first) {
  Layer l;
  l.H = check_a_log(w.A_log);
  l.D = int64_t(l.H) * K;
  l.place = {w.A_log.device, w.A_log.device_id};
  check_weights(w, l.D, l.place);
  l.W = int(w.conv_weight.shape[2]);
  l.conv_dim_first = conv_dim_first;
  l.has_f_b = w.f_b_weight.defined();
  l.has_conv_bias = w.conv_bias.defined();
  l.output_norm = w.output_norm;
  return l;
}

void reload(const LayerWeights& w, const Layer& layer) {
  const int h = check_a_log(w.A_log);
  if (h != layer.H)
    throw ShapeError("A_log", "H = " + std::to_string(layer.H) + " (as at construction)", std::to_string(h));
  const Place place{w.A_log.device, w.A_log.device_id};
  check_weights(w, layer.D, place);
  if (w.conv_weight.shape[2] != layer.W)
    throw ShapeError("conv_weight", "W = " + std::to_string(layer.W) + " (as at construction)",
                     std::to_string(w.conv_weight.shape[2]));
  // output_norm is part of every captured launch's parameters: a reload cannot switch it
  if (w.output_norm != layer.output_norm)
    throw ArgumentError("output_norm", std::string(layer.output_norm ? "true" : "false") + " (as at construction)",
                        w.output_norm ? "true" : "false");
  if (w.f_b_weight.defined() != layer.has_f_b || w.conv_bias.defined() != layer.has_conv_bias)
    throw ArgumentError("weights", "the same optional weights as at construction (f_b_weight, conv_bias)",
                        "a different set");
}

void null_slot(int null_slot) {
  if (null_slot < -1) throw ArgumentError("null_slot", "a slot id >= 0, or -1 for none", std::to_string(null_slot));
}

void policies(const std::unordered_map<StepKey, Policy, StepKeyHash>& policies, const Policy& default_policy) {
  auto check_pitch = [](const Policy& p) {
    if (p.pitch < 0) throw ArgumentError("pitch", ">= 0 (0: any)", std::to_string(p.pitch));
  };
  check_pitch(default_policy);
  std::string single;  // "decode and append": the modes with q = 1
  for (const ModeInfo& i : kModes)
    if (i.traits.single_token) single += (single.empty() ? "" : " and ") + std::string(i.name);
  for (const auto& [key, policy] : policies) {
    check_pitch(policy);
    switch (key_problem(key)) {
      case KeyProblem::kNone: break;
      case KeyProblem::kQRange:
        throw ArgumentError("policies", "step keys with q in [1, " + std::to_string(kMaxQ) + "]", key.describe());
      case KeyProblem::kSingleToken: throw ArgumentError("policies", single + " keys with q = 1", key.describe());
      case KeyProblem::kNegativeB: throw ArgumentError("policies", "step keys with B >= 0", key.describe());
    }
  }
}

CacheNeeds needs_of(StepMode mode) {
  const ModeTraits& t = mode_traits(mode);
  return {t.records, t.pending};
}

CacheFacts caches(const Caches& c, const Layer& layer, CacheNeeds needs) {
  const Place place = layer.place;
  const int H = layer.H;
  CacheFacts f;
  // ---- conv window --------------------------------------------------------------------
  const TensorView& cs = c.conv_state;
  const bool dim_first = layer.conv_dim_first;
  const std::string cs_doc =
      dim_first ? "[slots, 3D, window] (conv_dim_first=True)" : "[slots, window, 3D] (conv_dim_first=False)";
  expect_defined(cs, "conv_state", cs_doc);
  expect_dtype(cs, "conv_state", {DType::kBF16, DType::kF32});
  expect_rank(cs, "conv_state", 3, cs_doc);
  expect_device(cs, "conv_state", place);
  expect_dim(cs, "conv_state", dim_first ? 1 : 2, 3 * layer.D, "3·D channels of " + cs_doc);
  f.conv_slots = cs.shape[0];
  f.window = dim_first ? cs.shape[2] : cs.shape[1];
  f.chan_stride = dim_first ? cs.strides[1] : cs.strides[2];
  f.col_stride = dim_first ? cs.strides[2] : cs.strides[1];
  if (f.window < layer.W - 1)
    throw ShapeError("conv_state", "window >= W - 1 = " + std::to_string(layer.W - 1) + " columns",
                     std::to_string(f.window));

  // ---- recurrent state ----------------------------------------------------------------
  const TensorView& st = c.state;
  expect_defined(st, "state", "[slots, H, V, K]");
  expect_dtype(st, "state", {DType::kF32, DType::kBF16});
  expect_rank(st, "state", 4, "[slots, H, V, K]");
  expect_device(st, "state", place);
  expect_dim(st, "state", 1, H, "H heads");
  expect_dim(st, "state", 2, K, "V = 128");
  expect_dim(st, "state", 3, K, "K = 128");
  if (st.strides[3] != 1 || st.strides[2] != K || st.strides[1] != K * K)
    throw LayoutError("state",
                      "inner [H, V, K] dense with K contiguous (strides (slot, 16384, 128, 1): the VK layout; a [K, V] "
                      "or transposed pool is not supported)",
                      "strides " + strides_str(st));
  if (st.strides[0] < int64_t(H) * K * K)
    throw LayoutError("state", "slot stride >= H·V·K = " + std::to_string(int64_t(H) * K * K),
                      std::to_string(st.strides[0]));
  if (place.device == Device::kCUDA) {
    expect_aligned(st.data, 16, "state");
    const int64_t bytes = st.strides[0] * int64_t(dtype_size(st.dtype));
    if (bytes % 16)
      throw LayoutError("state", "slot stride a multiple of 16 bytes on CUDA", std::to_string(bytes) + " bytes");
  }

  // ---- records ------------------------------------------------------------------------
  if (needs.records) {
    const TensorView& cr = c.correction;
    const TensorView& kg = c.key_gate;
    expect_defined(cr, "correction", "records [rows_r, H, Qr, V] fp32 for record/fused/append steps");
    expect_defined(kg, "key_gate", "records [rows_r, H, Qr, 2K] fp32 for record/fused/append steps");
    expect_dtype(cr, "correction", {DType::kF32});
    expect_dtype(kg, "key_gate", {DType::kF32});
    expect_rank(cr, "correction", 4, "[rows_r, H, Qr, V]");
    expect_rank(kg, "key_gate", 4, "[rows_r, H, Qr, 2K]");
    expect_device(cr, "correction", place);
    expect_device(kg, "key_gate", place);
    expect_dim(cr, "correction", 1, H, "H heads");
    expect_dim(kg, "key_gate", 1, H, "H heads");
    expect_dim(cr, "correction", 3, K, "V = 128");
    expect_dim(kg, "key_gate", 3, 2 * K, "2K = 256");
    f.rows_r = cr.shape[0];
    f.Qr = int(cr.shape[2]);
    expect_dim(kg, "key_gate", 0, f.rows_r, "rows_r as correction");
    expect_dim(kg, "key_gate", 2, f.Qr, "Qr as correction");
    if (f.Qr < 1) throw ShapeError("correction", "Qr >= 1", std::to_string(f.Qr));
    if (cr.strides[3] != 1 || cr.strides[2] != K || cr.strides[1] != int64_t(f.Qr) * K)
      throw LayoutError("correction", "inner [H, Qr, V] dense", "strides " + strides_str(cr));
    if (kg.strides[3] != 1 || kg.strides[2] != 2 * K || kg.strides[1] != int64_t(f.Qr) * 2 * K)
      throw LayoutError("key_gate", "inner [H, Qr, 2K] dense", "strides " + strides_str(kg));
    if (place.device == Device::kCUDA) {
      expect_aligned(cr.data, 16, "correction");
      expect_aligned(kg.data, 16, "key_gate");
      if (cr.strides[0] % 4)
        throw LayoutError("correction", "row stride a multiple of 4 elements on CUDA", std::to_string(cr.strides[0]));
      if (kg.strides[0] % 4)
        throw LayoutError("key_gate", "row stride a multiple of 4 elements on CUDA", std::to_string(kg.strides[0]));
    }
  }
  if (needs.pending) {
    const TensorView& pd = c.pending;
    expect_defined(pd, "pending", "[rows_r] int32 for fused/append steps and flush");
    expect_dtype(pd, "pending", {DType::kI32});
    expect_rank(pd, "pending", 1, "[rows_r]");
    expect_device(pd, "pending", place);
    if (needs.records || c.correction.defined())
      expect_dim(pd, "pending", 0, c.correction.shape[0], "rows_r as the records");
  }
  return f;
}

}  // namespace kda::validate
