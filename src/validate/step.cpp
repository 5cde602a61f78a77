// src/validate/step.cpp — the validator's step half: step keys and rows, input views and
// out, the slot tensors, what each key needs of the caches, commit / flush (validate.h).
#include <climits>
#include <string>

#include "validate/validate.h"

namespace kda::validate {

KeyProblem key_problem(const StepKey& key) {
  if (key.q < 1 || key.q > kMaxQ) return KeyProblem::kQRange;
  if (mode_traits(key.mode).single_token && key.q != 1) return KeyProblem::kSingleToken;
  if (key.B < 0) return KeyProblem::kNegativeB;
  return KeyProblem::kNone;
}

void step_key(const StepKey& key) {
  const std::string mode = mode_name(key.mode);
  switch (key_problem(key)) {
    case KeyProblem::kNone: return;
    case KeyProblem::kQRange:
      throw PlanError(key.describe(), "q must be in [1, " + std::to_string(kMaxQ) + "], got " + std::to_string(key.q));
    case KeyProblem::kSingleToken:
      throw PlanError(key.describe(), mode + " steps have q = 1, got q = " + std::to_string(key.q));
    case KeyProblem::kNegativeB: throw PlanError(key.describe(), "B must be >= 0, got " + std::to_string(key.B));
  }
}

int64_t step_rows(StepMode mode, int q, int64_t rows) {
  if (q < 1 || q > kMaxQ)
    throw ArgumentError("q", "tokens per request in [1, " + std::to_string(kMaxQ) + "]", std::to_string(q));
  if (mode_traits(mode).single_token && q != 1)
    throw ArgumentError("q", std::string("1 for ") + mode_name(mode) + " steps", std::to_string(q));
  if (rows % q) throw ShapeError("inputs", "rows = B·q with q = " + std::to_string(q), std::to_string(rows) + " rows");
  const int64_t B = rows / q;
  if (B > INT32_MAX / 2) throw ShapeError("inputs", "fewer than 2^30 requests", std::to_string(B));
  return B;
}

void key_fits(const StepKey& key, const CacheFacts& facts, const Layer& layer) {
  const int64_t need = layer.W - 2 + key.q;
  if (facts.window < need)
    throw ShapeError("conv_state", "window >= W - 2 + q = " + std::to_string(need) + " for step " + key.describe(),
                     std::to_string(facts.window));
  if (mode_traits(key.mode).records && key.q > facts.Qr)
    throw ShapeError("correction", "Qr >= q = " + std::to_string(key.q) + " for step " + key.describe(),
                     std::to_string(facts.Qr));
}

int64_t projected_rows(const TensorView& pj) {
  expect_defined(pj, "projected", "[rows, pitch] bf16");
  expect_dtype(pj, "projected", {DType::kBF16});
  expect_rank(pj, "projected", 2, "[rows, pitch]");
  expect_unit_inner(pj, "projected");
  return pj.shape[0];
}

int64_t views_rows(const InputViews& in) {
  expect_defined(in.qkv, "qkv", "[rows, 3D] bf16");
  expect_rank(in.qkv, "qkv", 2, "[rows, 3D]");
  return in.qkv.shape[0];
}

InputViews projected_views(const TensorView& pj, GateMode gate_mode, const Layer& layer) {
  const bool pre = gate_mode == GateMode::kPrecomputed;
  const int64_t D = layer.D, gate_cols = pre ? D : kRank;
  const int64_t need = 4 * D + gate_cols + layer.H;
  if (pj.shape[1] < need)
    throw ShapeError("projected",
                     "at least 4D + " + std::string(pre ? "D" : "R") + " + H = " + std::to_string(need) +
                         " columns (gate mode " + gate_mode_name(gate_mode) + ")",
                     std::to_string(pj.shape[1]));
  if (pj.shape[0] > 1 && pj.strides[0] < pj.shape[1])
    throw LayoutError("projected", "row pitch >= its " + std::to_string(pj.shape[1]) + " columns",
                      std::to_string(pj.strides[0]));
  auto slice = [&](int64_t c0, int64_t n) {
    TensorView v = pj;
    v.data = static_cast<uint16_t*>(pj.data) + c0;
    v.shape[1] = n;
    return v;
  };
  return {slice(0, 3 * D), slice(3 * D, D), slice(4 * D, gate_cols), slice(4 * D + gate_cols, layer.H)};
}

void inputs(const InputViews& in, const TensorView& out, const Plan& plan, const Layer& layer, int64_t pitch_seen) {
  const int64_t rows = in.qkv.shape[0];
  const int64_t D = layer.D;
  struct V {
    const TensorView* t;
    const char* name;
    int64_t cols;
  };
  const int64_t gate_cols = plan.gate_mode == GateMode::kPrecomputed ? D : kRank;
  for (V v : {V{&in.qkv, "qkv", 3 * D}, V{&in.out_gate, "out_gate", D}, V{&in.gate_in, "gate_in", gate_cols},
              V{&in.beta, "beta", layer.H}}) {
    // without the output norm (SPEC §9) the out gate is not read: it may be absent
    if (v.t == &in.out_gate && !layer.output_norm && !v.t->defined()) continue;
    expect_defined(*v.t, v.name,
                   v.t == &in.out_gate ? "a [rows, cols] bf16 input for the output norm (a layer built with "
                                         "output_norm=false takes none)"
                                       : "a [rows, cols] bf16 input");
    expect_dtype(*v.t, v.name, {DType::kBF16});
    expect_rank(*v.t, v.name, 2, "[rows, " + std::to_string(v.cols) + "]");
    expect_device(*v.t, v.name, layer.place);
    expect_dim(*v.t, v.name, 0, rows, "rows as qkv");
    if (v.t->shape[1] != v.cols)
      throw ShapeError(
          v.name,
          std::to_string(v.cols) + " columns" +
              (v.t == &in.gate_in ? std::string(" for gate mode ") + gate_mode_name(plan.gate_mode) : std::string()),
          std::to_string(v.t->shape[1]));
    expect_unit_inner(*v.t, v.name);
    if (rows > 1 && v.t->strides[0] < 0)
      throw LayoutError(v.name, "a non-negative row stride", std::to_string(v.t->strides[0]));
  }
  if (plan.pitch != 0 && pitch_seen >= 0 && pitch_seen != plan.pitch)
    throw LayoutError("projected",
                      "row pitch " + std::to_string(plan.pitch) + " (the policy of step " + plan.key.describe() + ")",
                      std::to_string(pitch_seen));
  expect_defined(out, "out", "[rows, D] bf16");
  expect_dtype(out, "out", {DType::kBF16});
  expect_rank(out, "out", 2, "[rows, D]");
  expect_device(out, "out", layer.place);
  expect_dim(out, "out", 0, rows, "rows = B·q");
  expect_dim(out, "out", 1, D, "D = 128·H");
  expect_unit_inner(out, "out");
  if (rows > 1 && out.strides[0] < D)
    throw LayoutError("out", "row stride >= D = " + std::to_string(D), std::to_string(out.strides[0]));
}

void step_args(const StepArgs& a, int64_t B, const Layer& layer) {
  const ModeTraits& mt = mode_traits(a.mode);
  const std::string mode = mode_name(a.mode);
  const TensorView& sl = a.slots;
  expect_defined(sl, "slots", "int32 slot ids");
  expect_dtype(sl, "slots", {DType::kI32});
  expect_device(sl, "slots", layer.place);
  if (mt.per_token_slots) {
    if (sl.ndim == 1 && a.q != 1)
      throw ShapeError("slots", "rank 2 [>=B, >=q] for " + mode + " steps", "rank 1 " + shape_str(sl));
    if (sl.ndim != 1 && sl.ndim != 2) throw ShapeError("slots", "rank 2 [>=B, >=q]", "rank " + std::to_string(sl.ndim));
    expect_dim_at_least(sl, "slots", 0, B, "requests B");
    if (sl.ndim == 2) expect_dim_at_least(sl, "slots", 1, a.q, "tokens q (state after token t goes to column t)");
  } else {
    if (sl.ndim != 1 && sl.ndim != 2)
      throw ShapeError("slots", "rank 1 [>=B] (or [>=B, >=1]) for " + mode + " steps",
                       "rank " + std::to_string(sl.ndim));
    expect_dim_at_least(sl, "slots", 0, B, "requests B");
    if (sl.ndim == 2) expect_dim_at_least(sl, "slots", 1, 1, "one slot per request");
  }
  expect_index_vector(a.accepted, "accepted", B, layer.place);
  if (a.out_slots.defined() && !mt.out_slots)
    throw ArgumentError("out_slots", "none for " + mode + " steps (decode only)", a.out_slots.describe());
  expect_index_vector(a.out_slots, "out_slots", B, layer.place);
  if (a.record_rows.defined() && !mt.records)
    throw ArgumentError("record_rows", "none for " + mode + " steps (record/fused/append only)",
                        a.record_rows.describe());
  expect_index_vector(a.record_rows, "record_rows", B, layer.place);
}

void arrivals(const CacheFacts& facts, int64_t prepared_rows) {
  if (facts.rows_r > prepared_rows)
    throw ArgumentError(
        "pending",
        "at most " + std::to_string(prepared_rows) + " records rows (call prepare(caches) with these caches first)",
        std::to_string(facts.rows_r));
}

int64_t fold_args(const TensorView& slots, const TensorView& record_rows, const TensorView& counts, bool flush,
                  const Layer& layer) {
  expect_defined(slots, "slots", "[B] int32 checkpoint slots");
  expect_dtype(slots, "slots", {DType::kI32});
  expect_device(slots, "slots", layer.place);
  if (slots.ndim != 1 && slots.ndim != 2)
    throw ShapeError("slots", "rank 1 [B] (or [B, >=1])", "rank " + std::to_string(slots.ndim));
  if (slots.ndim == 2) expect_dim_at_least(slots, "slots", 1, 1, "one slot per request");
  const int64_t B = slots.shape[0];
  expect_index_vector(record_rows, "record_rows", B, layer.place);
  if (!flush) {
    expect_defined(counts, "counts", "[>=B] int32 fold counts");
    expect_index_vector(counts, "counts", B, layer.place);
  }
  return B;
}

}  // namespace kda::validate
