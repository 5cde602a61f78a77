// The table of every host-side validation (src/validate/, and the planner's in src/plan/plan.cpp)
// (docs/VALIDATION.md), one test per row: Rows/ValidationTable.Row/<ID>. Each row triggers
// exactly its check and expects std::invalid_argument whose message names the operand (as a
// word) and contains the row's excerpt, with nothing written (the pools and the poisoned
// outputs are compared bytewise). Rows whose check runs only with the CUDA backend (a data
// pointer or stride the CUDA kernels need, the fused arrival counters) name the Python test
// that covers them on a GPU (tests/python/test_validation_table.py) and skip here.
//
//   KDA_PRINT_VALIDATION_TABLE=1 kda_tests --gtest_filter='ValidationTableDoc.*'   # the markdown rows
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "api.h"
#include "scaffold.h"
#include "kda/plan.h"

namespace kt {
namespace {

using kda::Device;
using kda::DeviceInfo;
using kda::GateMode;
using kda::LayerShape;
using kda::Variant;
using ::testing::HasSubstr;

constexpr int H = ValidScaffold::H, D = ValidScaffold::D, W = 4, WINDOW = ValidScaffold::WINDOW,
              NSLOTS = ValidScaffold::NSLOTS, QR = ValidScaffold::QR;

bool ident_char(char c) { return std::isalnum((unsigned char)c) || c == '_'; }
bool names_word(const std::string& msg, const std::string& op) {
  for (size_t p = msg.find(op); p != std::string::npos; p = msg.find(op, p + 1)) {
    const bool left = p == 0 || !ident_char(msg[p - 1]);
    const bool right = p + op.size() >= msg.size() || !ident_char(msg[p + op.size()]);
    if (left && right) return true;
  }
  return false;
}

/// The scaffold every row starts from: a valid layer (H = 2, conv bias), a DS pool with
/// records and pending (window 6, Qr 4), inputs for decode (B = 2) and verify (B = 2, q = 2).
struct Fx : ValidScaffold {
  std::vector<unsigned char> scratch = std::vector<unsigned char>(1 << 16, 0);

  Fx() : ValidScaffold(4343) {}
  Caches caches() { return pool.caches(); }
  using ValidScaffold::run;
  void run_c(StepMode m, const Caches& c) { run(m, args(m), c); }
  void views(const InputViews& v, StepMode m = StepMode::kDecode) { kda->run_views(v, outv(m), caches(), args(m)); }
  void views(const InputViews& v, const StepArgs& a) { kda->run_views(v, a.mode == StepMode::kDecode ? out1.view() : out2.view(), caches(), a); }
  void construct(const LayerWeights& w, std::unordered_map<StepKey, Policy, kda::StepKeyHash> pols = {}, int null_slot = 0) {
    PreparedKda k(w, std::move(pols), true, null_slot);
  }
  LayerWeights cuda_weights() {  // every weight tagged as CUDA memory (validated before any use)
    LayerWeights w = L.weights();
    for (TensorView* t : {&w.conv_weight, &w.conv_bias, &w.f_b_weight, &w.A_log, &w.dt_bias, &w.norm_weight})
      t->device = Device::kCUDA;
    return w;
  }
};

struct Row {
  const char* id;
  const char* api;        ///< where the check runs
  const char* operand;    ///< the operand the message names
  const char* condition;  ///< what is refused
  const char* excerpt;    ///< a part of the message
  std::function<void(Fx&)> trigger;  ///< nullptr: a CUDA-only check (covered by gpu_test)
  const char* gpu_test = "";
};

std::ostream& operator<<(std::ostream& os, const Row& r) { return os << r.id; }

// ---- planner rows: plan_step is a pure function of a fake device --------------------------
DeviceInfo gpu_dev(bool clusters = true, int64_t smem = 232448) {
  DeviceInfo d;
  d.device = Device::kCUDA;
  d.sms = 132;
  d.cc_major = 9;
  d.smem_optin = smem;
  d.clusters = clusters;
  return d;
}
LayerShape shape(int h = 4, bool f_b = true, int w = 4) {
  LayerShape l;
  l.H = h;
  l.W = w;
  l.has_f_b = f_b;
  l.window = 6;
  return l;
}
Policy pol(Variant v = Variant::kAuto, GateMode g = GateMode::kAuto) {
  Policy p;
  p.variant = v;
  p.gate_mode = g;
  return p;
}

TensorView with_dtype(TensorView t, DType d) {
  t.dtype = d;
  return t;
}
TensorView with_device(TensorView t) {
  t.device = Device::kCUDA;
  return t;
}
TensorView with_shape(TensorView t, int dim, int64_t v) {
  t.shape[dim] = v;
  return t;
}
TensorView with_stride(TensorView t, int dim, int64_t v) {
  t.strides[dim] = v;
  return t;
}
/// Same data, one more leading dimension of 1.
TensorView add_dim(TensorView t) {
  for (int d = t.ndim; d > 0; --d) {
    t.shape[d] = t.shape[d - 1];
    t.strides[d] = t.strides[d - 1];
  }
  t.shape[0] = 1;
  t.strides[0] = t.ndim ? t.strides[1] * t.shape[1] : 1;
  ++t.ndim;
  return t;
}

#define W_(edit) [](Fx& f) { LayerWeights w = f.L.weights(); edit; f.construct(w); }
#define C_(mode, edit) [](Fx& f) { Caches c = f.caches(); edit; f.run_c(StepMode::mode, c); }
#define A_(mode, edit) [](Fx& f) { StepArgs a = f.args(StepMode::mode); edit; f.run(StepMode::mode, a); }
#define V_(edit) [](Fx& f) { InputViews v = f.in1.views(); edit; f.views(v); }
#define GPU_ONLY(id) nullptr, "tests/python/test_validation_table.py::test_cuda_only_row[" id "]"

const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      // ---- weights: PreparedKda(...) and process_weights_after_loading ------------------------
      {"W01", "constructor", "A_log", "missing", "A_log: expected a tensor ([H] fp32), got none", W_(w.A_log = TensorView{})},
      {"W02", "constructor", "A_log", "dtype not f32", "A_log: expected dtype f32, got bf16", W_(w.A_log.dtype = DType::kBF16)},
      {"W03", "constructor", "A_log", "rank not 1", "A_log: expected rank 1 [H]", W_(w.A_log = add_dim(w.A_log))},
      {"W04", "constructor", "A_log", "inner stride not 1", "A_log: expected unit inner stride", W_(w.A_log.strides[0] = 2)},
      {"W05", "constructor", "A_log", "H < 1 (shape [0])", "A_log: expected H >= 1 heads", W_(w.A_log.shape[0] = 0)},
      {"W06", "process_weights_after_loading", "A_log", "H differs from construction", "(as at construction)",
       [](Fx& f) {
         LayerWeights w = f.L.weights();
         w.A_log.shape[0] = H - 1;
         w.dt_bias.shape[0] = (H - 1) * K;
         w.f_b_weight.shape[0] = (H - 1) * K;
         w.conv_weight.shape[0] = 3 * (H - 1) * K;
         w.conv_bias.shape[0] = 3 * (H - 1) * K;
         f.kda->process_weights_after_loading(w);
       }},
      {"W07", "constructor", "conv_weight", "missing", "conv_weight: expected a tensor ([3D, 1, W])", W_(w.conv_weight = TensorView{})},
      {"W08", "constructor", "conv_weight", "dtype not f32 / bf16", "conv_weight: expected dtype f32 or bf16", W_(w.conv_weight.dtype = DType::kF16)},
      {"W09", "constructor", "conv_weight", "rank not 3", "conv_weight: expected rank 3 [3D, 1, W]", W_(w.conv_weight = add_dim(w.conv_weight))},
      {"W10", "constructor", "conv_weight", "dim 0 not 3·D (D = 128·H from A_log)", "dimension 0 (3·D = 3·128·H)", W_(w.conv_weight.shape[0] = 3 * D + 3 * K)},
      {"W11", "constructor", "conv_weight", "dim 1 not 1", "dimension 1 (depthwise in-channels) = 1", W_(w.conv_weight.shape[1] = 2)},
      {"W12", "constructor", "conv_weight", "W < 2 taps", "conv_weight: expected W >= 2 taps", W_(w.conv_weight.shape[2] = 1)},
      {"W13", "process_weights_after_loading", "conv_weight", "W differs from construction", "conv_weight: expected W = 4 (as at construction)",
       [](Fx& f) {
         LayerWeights w = f.L.weights();
         w.conv_weight.shape[2] = 3;
         f.kda->process_weights_after_loading(w);
       }},
      {"W14", "constructor", "conv_weight", "not on A_log's device (or GPU id)", "conv_weight: expected device cpu (the layer's weights), got cuda:0",
       W_(w.conv_weight.device = Device::kCUDA)},
      {"W15", "constructor", "dt_bias", "missing", "dt_bias: expected a tensor ([D] fp32)", W_(w.dt_bias = TensorView{})},
      {"W16", "constructor", "dt_bias", "dtype not f32", "dt_bias: expected dtype f32", W_(w.dt_bias.dtype = DType::kBF16)},
      {"W17", "constructor", "dt_bias", "rank not 1", "dt_bias: expected rank 1 [D]", W_(w.dt_bias = add_dim(w.dt_bias))},
      {"W18", "constructor", "dt_bias", "dim 0 not D", "dt_bias: expected dimension 0 (D = 128·H)", W_(w.dt_bias.shape[0] = D + K)},
      {"W19", "constructor", "dt_bias", "inner stride not 1", "dt_bias: expected unit inner stride", W_(w.dt_bias.strides[0] = 2)},
      {"W20", "constructor", "dt_bias", "not on A_log's device", "dt_bias: expected device cpu", W_(w.dt_bias.device = Device::kCUDA)},
      {"W21", "constructor", "f_b_weight", "dtype not bf16", "f_b_weight: expected dtype bf16", W_(w.f_b_weight.dtype = DType::kF32)},
      {"W22", "constructor", "f_b_weight", "rank not 2", "f_b_weight: expected rank 2 [D, R]", W_(w.f_b_weight = add_dim(w.f_b_weight))},
      {"W23", "constructor", "f_b_weight", "dim 0 not D", "f_b_weight: expected dimension 0 (D = 128·H)", W_(w.f_b_weight.shape[0] = D - K)},
      {"W24", "constructor", "f_b_weight", "dim 1 not R = 128", "f_b_weight: expected dimension 1 (R = 128)", W_(w.f_b_weight.shape[1] = 64)},
      {"W25", "constructor", "f_b_weight", "inner stride not 1", "f_b_weight: expected unit inner stride", W_(w.f_b_weight.strides[1] = 2)},
      {"W26", "constructor", "f_b_weight", "not on A_log's device", "f_b_weight: expected device cpu", W_(w.f_b_weight.device = Device::kCUDA)},
      {"W27", "constructor (CUDA weights)", "f_b_weight", "data not 16-byte aligned", "f_b_weight: expected 16-byte aligned data pointer",
       [](Fx& f) {
         LayerWeights w = f.cuda_weights();
         w.f_b_weight.data = static_cast<uint16_t*>(w.f_b_weight.data) + 1;
         f.construct(w);
       }},
      {"W28", "constructor (CUDA weights)", "f_b_weight", "row stride not a multiple of 8 elements", "a row stride that is a multiple of 8 elements (16 bytes) on CUDA",
       [](Fx& f) {
         LayerWeights w = f.cuda_weights();
         w.f_b_weight.strides[0] = K + 4;
         f.construct(w);
       }},
      {"W29", "constructor", "conv_bias", "dtype not f32", "conv_bias: expected dtype f32", W_(w.conv_bias.dtype = DType::kBF16)},
      {"W30", "constructor", "conv_bias", "rank not 1", "conv_bias: expected rank 1 [3D]", W_(w.conv_bias = add_dim(w.conv_bias))},
      {"W31", "constructor", "conv_bias", "dim 0 not 3·D", "conv_bias: expected dimension 0 (3·D)", W_(w.conv_bias.shape[0] = 3 * D - 3)},
      {"W32", "constructor", "conv_bias", "inner stride not 1", "conv_bias: expected unit inner stride", W_(w.conv_bias.strides[0] = 2)},
      {"W33", "constructor", "conv_bias", "not on A_log's device", "conv_bias: expected device cpu", W_(w.conv_bias.device = Device::kCUDA)},
      {"W34", "constructor", "norm_weight", "missing (with the output norm)", "norm_weight: expected a tensor ([K] float for the output norm; output_norm=false builds without it)",
       W_(w.norm_weight = TensorView{})},
      {"W35", "constructor", "norm_weight", "dtype not a float", "norm_weight: expected dtype f32 or bf16 or f16 or f64", W_(w.norm_weight.dtype = DType::kI32)},
      {"W36", "constructor", "norm_weight", "rank not 1", "norm_weight: expected rank 1 [K]", W_(w.norm_weight = add_dim(w.norm_weight))},
      {"W37", "constructor", "norm_weight", "dim 0 not K = 128", "norm_weight: expected dimension 0 (K = 128)", W_(w.norm_weight.shape[0] = 64)},
      {"W38", "constructor", "norm_weight", "not on A_log's device", "norm_weight: expected device cpu", W_(w.norm_weight.device = Device::kCUDA)},
      {"W39", "constructor", "eps", "not > 0 (or NaN)", "eps: expected a positive RMSNorm epsilon", W_(w.eps = 0.f)},
      {"W40", "constructor", "lower_bound", "set and outside [-5, 0)", "lower_bound: expected none or a value in [-5, 0)", W_(w.lower_bound = 0.5f)},
      {"W41", "constructor", "null_slot", "< -1", "null_slot: expected a slot id >= 0, or -1 for none",
       [](Fx& f) { f.construct(f.L.weights(), {}, -2); }},
      {"W42", "constructor", "policies", "a key with q outside [1, 16]", "policies: expected step keys with q in [1, 16]",
       [](Fx& f) { f.construct(f.L.weights(), {{StepKey{StepMode::kRecord, 2, 17}, Policy{}}}); }},
      {"W43", "constructor", "policies", "a decode key with q != 1", "policies: expected decode and append keys with q = 1",
       [](Fx& f) { f.construct(f.L.weights(), {{StepKey{StepMode::kDecode, 2, 2}, Policy{}}}); }},
      {"W44", "constructor", "policies", "a key with B < 0", "policies: expected step keys with B >= 0",
       [](Fx& f) { f.construct(f.L.weights(), {{StepKey{StepMode::kDecode, -1, 1}, Policy{}}}); }},
      {"W45", "process_weights_after_loading", "weights", "a different set of optional weights (f_b_weight, conv_bias)",
       "weights: expected the same optional weights as at construction",
       [](Fx& f) {
         LayerWeights w = f.L.weights();
         w.conv_bias = TensorView{};
         f.kda->process_weights_after_loading(w);
       }},
      {"W46", "constructor (output_norm=false)", "norm_weight", "given without the output norm but not [K] (optional, checked when given)",
       "norm_weight: expected dimension 0 (K = 128)", W_(w.output_norm = false; w.norm_weight.shape[0] = 64)},
      {"W47", "process_weights_after_loading", "output_norm", "differs from construction", "output_norm: expected true (as at construction), got false",
       [](Fx& f) {
         LayerWeights w = f.L.weights();
         w.output_norm = false;
         f.kda->process_weights_after_loading(w);
       }},
      {"W48", "constructor (output_norm=false)", "eps", "not > 0 (checked without the output norm too)", "eps: expected a positive RMSNorm epsilon",
       W_(w.output_norm = false; w.norm_weight = TensorView{}; w.eps = -1.f)},

      // ---- caches: prepare, run, run_views, commit, flush ---------------------------------------
      {"C01", "prepare / run / commit / flush", "conv_state", "missing", "conv_state: expected a tensor ([slots, 3D, window] (conv_dim_first=True))",
       C_(kDecode, c.conv_state = TensorView{})},
      {"C02", "prepare / run / commit / flush", "conv_state", "dtype not bf16 / f32", "conv_state: expected dtype bf16 or f32", C_(kDecode, c.conv_state.dtype = DType::kF16)},
      {"C03", "prepare / run / commit / flush", "conv_state", "rank not 3", "conv_state: expected rank 3", C_(kDecode, c.conv_state = add_dim(c.conv_state))},
      {"C04", "prepare / run / commit / flush", "conv_state", "not on the weights' device", "conv_state: expected device cpu", C_(kDecode, c.conv_state.device = Device::kCUDA)},
      {"C05", "prepare / run / commit / flush", "conv_state", "channels (DS dim 1, SD dim 2) not 3·D", "(3·D channels of [slots, 3D, window]",
       C_(kDecode, c.conv_state.shape[1] = 3 * D + 1)},
      {"C06", "prepare / run / commit / flush", "conv_state", "window < W - 1", "conv_state: expected window >= W - 1 = 3 columns", C_(kDecode, c.conv_state.shape[2] = 2)},
      {"C07", "prepare / run / commit / flush", "state", "missing", "state: expected a tensor ([slots, H, V, K])", C_(kDecode, c.state = TensorView{})},
      {"C08", "prepare / run / commit / flush", "state", "dtype not f32 / bf16", "state: expected dtype f32 or bf16", C_(kDecode, c.state.dtype = DType::kF16)},
      {"C09", "prepare / run / commit / flush", "state", "rank not 4", "state: expected rank 4 [slots, H, V, K]",
       C_(kDecode, c.state = make_view(f.pool.state.data(), DType::kF32, {NSLOTS, H * K, K}))},
      {"C10", "prepare / run / commit / flush", "state", "not on the weights' device", "state: expected device cpu", C_(kDecode, c.state.device = Device::kCUDA)},
      {"C11", "prepare / run / commit / flush", "state", "dim 1 not H", "state: expected dimension 1 (H heads) = 2", C_(kDecode, c.state.shape[1] = H + 1)},
      {"C12", "prepare / run / commit / flush", "state", "dim 2 not V = 128", "state: expected dimension 2 (V = 128)", C_(kDecode, c.state.shape[2] = 64)},
      {"C13", "prepare / run / commit / flush", "state", "dim 3 not K = 128", "state: expected dimension 3 (K = 128)", C_(kDecode, c.state.shape[3] = 64)},
      {"C14", "prepare / run / commit / flush", "state", "inner strides not VK-dense (a [K, V] view, transposed, padded rows or heads)",
       "the VK layout; a [K, V] or transposed pool is not supported", C_(kDecode, std::swap(c.state.strides[2], c.state.strides[3]))},
      {"C15", "prepare / run / commit / flush", "state", "slot stride < H·V·K", "state: expected slot stride >= H·V·K = 32768",
       C_(kDecode, c.state.strides[0] = int64_t(H) * K * K - 8)},
      {"C16", "prepare / run / commit / flush (CUDA)", "state", "data not 16-byte aligned", "state: expected 16-byte aligned data pointer", GPU_ONLY("C16")},
      {"C17", "prepare / run / commit / flush (CUDA)", "state", "slot stride not a multiple of 16 bytes", "state: expected slot stride a multiple of 16 bytes on CUDA", GPU_ONLY("C17")},
      {"C18", "record / fused steps, commit, flush (and prepare when given)", "correction", "missing", "correction: expected a tensor (records [rows_r, H, Qr, V] fp32",
       C_(kRecord, c.correction = TensorView{})},
      {"C19", "record / fused steps, commit, flush (and prepare when given)", "key_gate", "missing", "key_gate: expected a tensor (records [rows_r, H, Qr, 2K] fp32",
       C_(kRecord, c.key_gate = TensorView{})},
      {"C20", "records", "correction", "dtype not f32", "correction: expected dtype f32", C_(kRecord, c.correction.dtype = DType::kBF16)},
      {"C21", "records", "key_gate", "dtype not f32", "key_gate: expected dtype f32", C_(kRecord, c.key_gate.dtype = DType::kF64)},
      {"C22", "records", "correction", "rank not 4", "correction: expected rank 4 [rows_r, H, Qr, V]",
       C_(kRecord, c.correction = make_view(f.pool.corr.data(), DType::kF32, {NSLOTS, H * QR, K}))},
      {"C23", "records", "key_gate", "rank not 4", "key_gate: expected rank 4 [rows_r, H, Qr, 2K]",
       C_(kRecord, c.key_gate = make_view(f.pool.kg.data(), DType::kF32, {NSLOTS, H * QR, 2 * K}))},
      {"C24", "records", "correction", "not on the weights' device", "correction: expected device cpu", C_(kRecord, c.correction.device = Device::kCUDA)},
      {"C25", "records", "key_gate", "not on the weights' device", "key_gate: expected device cpu", C_(kRecord, c.key_gate.device = Device::kCUDA)},
      {"C26", "records", "correction", "dim 1 not H", "correction: expected dimension 1 (H heads)", C_(kRecord, c.correction.shape[1] = H + 1)},
      {"C27", "records", "key_gate", "dim 1 not H", "key_gate: expected dimension 1 (H heads)", C_(kRecord, c.key_gate.shape[1] = H - 1)},
      {"C28", "records", "correction", "dim 3 not V = 128", "correction: expected dimension 3 (V = 128)", C_(kRecord, c.correction.shape[3] = 64)},
      {"C29", "records", "key_gate", "dim 3 not 2K = 256", "key_gate: expected dimension 3 (2K = 256)", C_(kRecord, c.key_gate.shape[3] = K)},
      {"C30", "records", "key_gate", "rows_r not as correction", "key_gate: expected dimension 0 (rows_r as correction)", C_(kRecord, c.key_gate.shape[0] = NSLOTS - 1)},
      {"C31", "records", "key_gate", "Qr not as correction", "key_gate: expected dimension 2 (Qr as correction)", C_(kRecord, c.key_gate.shape[2] = QR - 1)},
      {"C32", "records", "correction", "Qr < 1", "correction: expected Qr >= 1",
       C_(kRecord, c.correction.shape[2] = 0; c.key_gate.shape[2] = 0)},
      {"C33", "records", "correction", "inner [H, Qr, V] not dense", "correction: expected inner [H, Qr, V] dense", C_(kRecord, c.correction.strides[2] = K + 1)},
      {"C34", "records", "key_gate", "inner [H, Qr, 2K] not dense", "key_gate: expected inner [H, Qr, 2K] dense", C_(kRecord, c.key_gate.strides[1] += 8)},
      {"C35", "records (CUDA)", "correction", "data not 16-byte aligned", "correction: expected 16-byte aligned data pointer", GPU_ONLY("C35")},
      {"C36", "records (CUDA)", "key_gate", "data not 16-byte aligned", "key_gate: expected 16-byte aligned data pointer", GPU_ONLY("C36")},
      {"C37", "records (CUDA)", "correction", "row stride not a multiple of 4 elements", "correction: expected row stride a multiple of 4 elements on CUDA", GPU_ONLY("C37")},
      {"C38", "records (CUDA)", "key_gate", "row stride not a multiple of 4 elements", "key_gate: expected row stride a multiple of 4 elements on CUDA", GPU_ONLY("C38")},
      {"C39", "fused steps, flush (and prepare with a fused key or when given)", "pending", "missing", "pending: expected a tensor ([rows_r] int32 for fused/append steps and flush)",
       C_(kFused, c.pending = TensorView{})},
      {"C40", "pending", "pending", "dtype not int32", "pending: expected dtype i32, got i64", C_(kFused, c.pending.dtype = DType::kI64)},
      {"C41", "pending", "pending", "rank not 1", "pending: expected rank 1 [rows_r]", C_(kFused, c.pending = add_dim(c.pending))},
      {"C42", "pending", "pending", "not on the weights' device", "pending: expected device cpu", C_(kFused, c.pending.device = Device::kCUDA)},
      {"C43", "pending", "pending", "rows not rows_r of the records", "pending: expected dimension 0 (rows_r as the records)", C_(kFused, c.pending.shape[0] = NSLOTS + 1)},
      {"C44", "prepare", "conv_state", "window < W - 2 + q of a policy key", "conv_state: expected window >= W - 2 + q = 7 for step (record, B=2, q=5)",
       [](Fx& f) {
         PreparedKda k(f.L.weights(), {{StepKey{StepMode::kRecord, 2, 5}, Policy{}}}, true, 0);
         k.prepare(f.caches());
       }},
      {"C45", "prepare", "correction", "Qr < q of a record / fused policy key", "correction: expected Qr >= q = 2 for step (fused, B=2, q=2)",
       [](Fx& f) {
         Caches c = f.caches();
         c.correction = make_view(f.pool.corr.data(), DType::kF32, {NSLOTS, H, 1, K}, {f.pool.corr_row, K, K, 1});
         c.key_gate = make_view(f.pool.kg.data(), DType::kF32, {NSLOTS, H, 1, 2 * K}, {f.pool.kg_row, 2 * K, 2 * K, 1});
         PreparedKda k(f.L.weights(), {{StepKey{StepMode::kFused, 2, 2}, Policy{}}}, true, 0);
         k.prepare(c);
       }},

      // ---- a step: run and run_views ------------------------------------------------------------
      {"S01", "run_views", "q", "outside [1, 16]", "q: expected tokens per request in [1, 16], got 17",
       [](Fx& f) {
         StepArgs a = f.args(StepMode::kPerToken);
         a.q = 17;
         f.views(f.in2.views(), a);
       }},
      {"S02", "run_views", "q", "decode with q != 1", "q: expected 1 for decode steps, got 2",
       [](Fx& f) {
         StepArgs a = f.args(StepMode::kDecode);
         a.q = 2;
         f.views(f.in2.views(), a);
       }},
      {"S03", "run / run_views", "inputs", "rows not a multiple of q", "inputs: expected rows = B·q with q = 2, got 3 rows",
       [](Fx& f) {
         InputViews v = f.in2.views();
         for (TensorView* t : {&v.qkv, &v.out_gate, &v.gate_in, &v.beta}) t->shape[0] = 3;
         f.views(v, f.args(StepMode::kPerToken));
       }},
      {"S04", "run_views", "inputs", "B >= 2^30 requests", "inputs: expected fewer than 2^30 requests",
       V_(v.qkv.shape[0] = int64_t(1) << 31; v.qkv.strides[0] = 0)},
      {"S05", "run / run_views", "out_gate", "an input view missing (qkv, out_gate with the output norm, gate_in, beta)", "out_gate: expected a tensor (a [rows, cols] bf16 input for the output norm (a layer built with output_norm=false takes none))",
       V_(v.out_gate = TensorView{})},
      {"S06", "run / run_views", "gate_in", "an input view's dtype not bf16", "gate_in: expected dtype bf16", V_(v.gate_in.dtype = DType::kF32)},
      {"S07", "run / run_views", "beta", "an input view's rank not 2", "beta: expected rank 2 [rows, 2]", V_(v.beta = add_dim(v.beta))},
      {"S08", "run / run_views", "out_gate", "an input view not on the weights' device", "out_gate: expected device cpu", V_(v.out_gate.device = Device::kCUDA)},
      {"S09", "run / run_views", "beta", "an input view's rows not qkv's", "beta: expected dimension 0 (rows as qkv) = 2", V_(v.beta.shape[0] = 1)},
      {"S10", "run / run_views", "gate_in", "an input view's columns (qkv 3D, out_gate D, gate_in R or D by gate mode, beta H)",
       "gate_in: expected 128 columns for gate mode 0 (per item), got 256", V_(v.gate_in.shape[1] = D)},
      {"S11", "run / run_views", "qkv", "an input view's inner stride not 1", "qkv: expected unit inner stride", V_(v.qkv.strides[1] = 2)},
      {"S12", "run / run_views", "qkv", "an input view's row stride negative (rows > 1)", "qkv: expected a non-negative row stride", V_(v.qkv.strides[0] = -v.qkv.strides[0])},
      {"S13", "run", "projected", "the pitch differs from the policy's pitch", "projected: expected row pitch",
       [](Fx& f) {
         PreparedKda k(f.L.weights(), {{StepKey{StepMode::kDecode, 2, 1}, Policy{f.in1.pitch + 8, GateMode::kAuto, Variant::kAuto}}}, true, 0);
         k.run(f.in1.projected(), f.out1.view(), f.caches(), f.args(StepMode::kDecode));
       }},
      {"S14", "run / run_views", "out", "missing", "out: expected a tensor ([rows, D] bf16)",
       [](Fx& f) { f.kda->run(f.in1.projected(), TensorView{}, f.caches(), f.args(StepMode::kDecode)); }},
      {"S15", "run / run_views", "out", "dtype not bf16", "out: expected dtype bf16, got f32",
       [](Fx& f) { f.kda->run(f.in1.projected(), with_dtype(f.out1.view(), DType::kF32), f.caches(), f.args(StepMode::kDecode)); }},
      {"S16", "run / run_views", "out", "rank not 2", "out: expected rank 2 [rows, D]",
       [](Fx& f) { f.kda->run(f.in1.projected(), add_dim(f.out1.view()), f.caches(), f.args(StepMode::kDecode)); }},
      {"S17", "run / run_views", "out", "not on the weights' device", "out: expected device cpu",
       [](Fx& f) { f.kda->run(f.in1.projected(), with_device(f.out1.view()), f.caches(), f.args(StepMode::kDecode)); }},
      {"S18", "run / run_views", "out", "rows not B·q", "out: expected dimension 0 (rows = B·q) = 4",
       [](Fx& f) { f.kda->run(f.in2.projected(), with_shape(f.out2.view(), 0, 3), f.caches(), f.args(StepMode::kPerToken)); }},
      {"S19", "run / run_views", "out", "columns not D", "out: expected dimension 1 (D = 128·H) = 256",
       [](Fx& f) { f.kda->run(f.in1.projected(), with_shape(f.out1.view(), 1, D + 1), f.caches(), f.args(StepMode::kDecode)); }},
      {"S20", "run / run_views", "out", "inner stride not 1", "out: expected unit inner stride",
       [](Fx& f) { f.kda->run(f.in1.projected(), with_stride(f.out1.view(), 1, 2), f.caches(), f.args(StepMode::kDecode)); }},
      {"S21", "run / run_views", "out", "row stride < D (rows > 1)", "out: expected row stride >= D = 256",
       [](Fx& f) { f.kda->run(f.in1.projected(), with_stride(f.out1.view(), 0, D - 1), f.caches(), f.args(StepMode::kDecode)); }},
      {"S22", "run / run_views", "slots", "missing", "slots: expected a tensor (int32 slot ids)", A_(kDecode, a.slots = TensorView{})},
      {"S23", "run / run_views", "slots", "dtype not int32", "slots: expected dtype i32, got i64", A_(kDecode, a.slots.dtype = DType::kI64)},
      {"S24", "run / run_views", "slots", "not on the weights' device", "slots: expected device cpu", A_(kDecode, a.slots.device = Device::kCUDA)},
      {"S25", "run / run_views", "slots", "per_token with [B] slots and q != 1", "slots: expected rank 2 [>=B, >=q] for per_token steps, got rank 1",
       A_(kPerToken, a.slots = f.s1.view)},
      {"S26", "run / run_views", "slots", "per_token slots of rank > 2", "slots: expected rank 2 [>=B, >=q], got rank 3",
       A_(kPerToken, a.slots = add_dim(a.slots))},
      {"S27", "run / run_views", "slots", "per_token slots with fewer than B rows", "slots: expected dimension 0 (requests B) >= 2",
       A_(kPerToken, a.slots.shape[0] = 1)},
      {"S28", "run / run_views", "slots", "per_token rows narrower than q", "slots: expected dimension 1 (tokens q (state after token t goes to column t)) >= 2",
       A_(kPerToken, a.slots.shape[1] = 1)},
      {"S29", "run / run_views", "slots", "decode / record / fused slots of rank > 2", "slots: expected rank 1 [>=B] (or [>=B, >=1]) for decode steps",
       A_(kDecode, a.slots = add_dim(f.s2.view))},
      {"S30", "run / run_views", "slots", "decode / record / fused slots with fewer than B rows", "slots: expected dimension 0 (requests B) >= 2",
       A_(kRecord, a.slots.shape[0] = 1)},
      {"S31", "run / run_views", "slots", "decode / record / fused [B, 0] slots", "slots: expected dimension 1 (one slot per request) >= 1",
       A_(kFused, a.slots = make_view(f.s2.mem.data(), DType::kI32, {2, 0}, {2, 1}))},
      {"S32", "run / run_views", "accepted", "dtype not int32", "accepted: expected dtype i32", A_(kDecode, a.accepted = with_dtype(f.acc.view, DType::kI64))},
      {"S33", "run / run_views", "accepted", "rank not 1", "accepted: expected rank 1 [>=B]", A_(kDecode, a.accepted = add_dim(f.acc.view))},
      {"S34", "run / run_views", "accepted", "fewer than B entries", "accepted: expected dimension 0 (requests B) >= 2", A_(kDecode, a.accepted = with_shape(f.acc.view, 0, 1))},
      {"S35", "run / run_views", "out_slots", "given in a per_token / record / fused step", "out_slots: expected none for record steps (decode only)",
       A_(kRecord, a.out_slots = f.rows.view)},
      {"S36", "run / run_views", "out_slots", "dtype not int32", "out_slots: expected dtype i32", A_(kDecode, a.out_slots = with_dtype(f.rows.view, DType::kF32))},
      {"S37", "run / run_views", "out_slots", "rank not 1", "out_slots: expected rank 1 [>=B]", A_(kDecode, a.out_slots = add_dim(f.rows.view))},
      {"S38", "run / run_views", "out_slots", "fewer than B entries", "out_slots: expected dimension 0 (requests B) >= 2", A_(kDecode, a.out_slots = with_shape(f.rows.view, 0, 1))},
      {"S39", "run / run_views", "record_rows", "given in a decode / per_token step", "record_rows: expected none for per_token steps (record/fused/append only)",
       A_(kPerToken, a.record_rows = f.rows.view)},
      {"S40", "run / run_views", "record_rows", "dtype not int32", "record_rows: expected dtype i32", A_(kRecord, a.record_rows = with_dtype(f.rows.view, DType::kI64))},
      {"S41", "run / run_views", "record_rows", "rank not 1", "record_rows: expected rank 1 [>=B]", A_(kRecord, a.record_rows = add_dim(f.rows.view))},
      {"S42", "run / run_views", "record_rows", "fewer than B entries", "record_rows: expected dimension 0 (requests B) >= 2", A_(kFused, a.record_rows = with_shape(f.rows.view, 0, 1))},
      {"S43", "run / run_views", "accepted", "not on the weights' device", "accepted: expected device cpu", A_(kDecode, a.accepted = with_device(f.acc.view))},
      {"S44", "run / run_views", "out_slots", "not on the weights' device", "out_slots: expected device cpu", A_(kDecode, a.out_slots = with_device(f.rows.view))},
      {"S45", "run / run_views", "record_rows", "not on the weights' device", "record_rows: expected device cpu", A_(kRecord, a.record_rows = with_device(f.rows.view))},
      {"S46", "run / run_views", "conv_state", "window < W - 2 + q", "conv_state: expected window >= W - 2 + q = 7 for step (per_token, B=2, q=5), got 6",
       [](Fx& f) {
         InputData in = random_inputs(f.rng, 10, H);
         OutBuf o = make_out(10, D);
         Index sl = make_index_2d({{1, 2, 3, 4, 5}, {-1, -1, -1, -1, -1}}, 0);
         StepArgs a;
         a.mode = StepMode::kPerToken;
         a.q = 5;
         a.slots = sl.view;
         f.kda->run_views(in.views(), o.view(), f.caches(), a);
       }},
      {"S47", "run / run_views", "correction", "record / fused step with Qr < q", "correction: expected Qr >= q = 2 for step (record, B=2, q=2), got 1",
       [](Fx& f) {
         Caches c = f.caches();
         c.correction = make_view(f.pool.corr.data(), DType::kF32, {NSLOTS, H, 1, K}, {f.pool.corr_row, K, K, 1});
         c.key_gate = make_view(f.pool.kg.data(), DType::kF32, {NSLOTS, H, 1, 2 * K}, {f.pool.kg_row, 2 * K, 2 * K, 1});
         f.run_c(StepMode::kRecord, c);
       }},
      {"S48", "run / run_views (CUDA)", "pending", "fused step on records with more rows than prepare(caches) saw",
       "pending: expected at most", GPU_ONLY("S48")},
      {"S49", "run_views (output_norm=false)", "out_gate", "given without the output norm but not bf16 (optional, checked when given)",
       "out_gate: expected dtype bf16, got f32",
       [](Fx& f) {
         f.L.output_norm = false;
         PreparedKda k(f.L.weights(), {}, true, 0);
         InputViews v = f.in1.views();
         v.out_gate.dtype = DType::kF32;
         k.run_views(v, f.out1.view(), f.caches(), f.args(StepMode::kDecode));
       }},
      {"S50", "run_views (output_norm=false)", "qkv", "missing (only out_gate is optional without the output norm)",
       "qkv: expected a tensor ([rows, 3D] bf16)",
       [](Fx& f) {
         f.L.output_norm = false;
         PreparedKda k(f.L.weights(), {}, true, 0);
         InputViews v = f.in1.views();
         v.out_gate = TensorView{};
         v.qkv = TensorView{};
         k.run_views(v, f.out1.view(), f.caches(), f.args(StepMode::kDecode));
       }},

      // ---- the packed row: run ---------------------------------------------------------------
      {"R01", "run", "projected", "missing", "projected: expected a tensor ([rows, pitch] bf16)",
       [](Fx& f) { f.kda->run(TensorView{}, f.out1.view(), f.caches(), f.args(StepMode::kDecode)); }},
      {"R02", "run", "projected", "dtype not bf16", "projected: expected dtype bf16, got f16",
       [](Fx& f) { f.kda->run(with_dtype(f.in1.projected(), DType::kF16), f.out1.view(), f.caches(), f.args(StepMode::kDecode)); }},
      {"R03", "run", "projected", "rank not 2", "projected: expected rank 2 [rows, pitch]",
       [](Fx& f) { f.kda->run(add_dim(f.in1.projected()), f.out1.view(), f.caches(), f.args(StepMode::kDecode)); }},
      {"R04", "run", "projected", "inner stride not 1", "projected: expected unit inner stride",
       [](Fx& f) { f.kda->run(with_stride(f.in1.projected(), 1, 2), f.out1.view(), f.caches(), f.args(StepMode::kDecode)); }},
      {"R05", "run", "q", "outside [1, 16]", "q: expected tokens per request in [1, 16], got 0",
       [](Fx& f) {
         StepArgs a = f.args(StepMode::kPerToken);
         a.q = 0;
         f.run(StepMode::kPerToken, a);
       }},
      {"R06", "run", "projected", "fewer than 4D + R + H columns (gate mode 2: 4D + D + H)", "projected: expected at least 4D + R + H = 1154 columns (gate mode 0 (per item))",
       [](Fx& f) { f.kda->run(with_shape(f.in1.projected(), 1, 4 * D + R + H - 1), f.out1.view(), f.caches(), f.args(StepMode::kDecode)); }},
      {"R07", "run", "projected", "row pitch < its columns (rows > 1)", "projected: expected row pitch >= its",
       [](Fx& f) {
         TensorView p = f.in1.projected();
         p.strides[0] = p.shape[1] - 1;
         f.kda->run(p, f.out1.view(), f.caches(), f.args(StepMode::kDecode));
       }},
      {"V01", "run_views", "qkv", "missing", "qkv: expected a tensor ([rows, 3D] bf16)", V_(v.qkv = TensorView{})},
      {"V02", "run_views", "qkv", "rank not 2", "qkv: expected rank 2 [rows, 3D]", V_(v.qkv = add_dim(v.qkv))},

      // ---- commit / flush ----------------------------------------------------------------------
      {"F01", "commit / flush", "slots", "missing", "slots: expected a tensor ([B] int32 checkpoint slots)",
       [](Fx& f) { f.kda->flush(f.caches(), TensorView{}, f.rows.view); }},
      {"F02", "commit / flush", "slots", "dtype not int32", "slots: expected dtype i32",
       [](Fx& f) { f.kda->commit(f.caches(), with_dtype(f.s1.view, DType::kI64), f.rows.view, f.counts.view); }},
      {"F03", "commit / flush", "slots", "not on the weights' device", "slots: expected device cpu",
       [](Fx& f) { f.kda->flush(f.caches(), with_device(f.s1.view), f.rows.view); }},
      {"F04", "commit / flush", "slots", "rank not 1 or 2", "slots: expected rank 1 [B] (or [B, >=1]), got rank 3",
       [](Fx& f) { f.kda->commit(f.caches(), add_dim(f.s2.view), f.rows.view, f.counts.view); }},
      {"F05", "commit / flush", "slots", "[B, 0] slots", "slots: expected dimension 1 (one slot per request) >= 1",
       [](Fx& f) { f.kda->flush(f.caches(), make_view(f.s2.mem.data(), DType::kI32, {2, 0}, {2, 1}), f.rows.view); }},
      {"F06", "commit / flush", "record_rows", "dtype not int32", "record_rows: expected dtype i32",
       [](Fx& f) { f.kda->flush(f.caches(), f.s1.view, with_dtype(f.rows.view, DType::kI64)); }},
      {"F07", "commit / flush", "record_rows", "rank not 1", "record_rows: expected rank 1 [>=B]",
       [](Fx& f) { f.kda->commit(f.caches(), f.s1.view, add_dim(f.rows.view), f.counts.view); }},
      {"F08", "commit / flush", "record_rows", "fewer than B entries", "record_rows: expected dimension 0 (requests B) >= 2",
       [](Fx& f) { f.kda->flush(f.caches(), f.s1.view, with_shape(f.rows.view, 0, 1)); }},
      {"F09", "commit / flush", "record_rows", "not on the weights' device", "record_rows: expected device cpu",
       [](Fx& f) { f.kda->commit(f.caches(), f.s1.view, with_device(f.rows.view), f.counts.view); }},
      {"F10", "commit", "counts", "missing", "counts: expected a tensor ([>=B] int32 fold counts)",
       [](Fx& f) { f.kda->commit(f.caches(), f.s1.view, f.rows.view, TensorView{}); }},
      {"F11", "commit", "counts", "dtype not int32", "counts: expected dtype i32",
       [](Fx& f) { f.kda->commit(f.caches(), f.s1.view, f.rows.view, with_dtype(f.counts.view, DType::kF32)); }},
      {"F12", "commit", "counts", "rank not 1", "counts: expected rank 1 [>=B]",
       [](Fx& f) { f.kda->commit(f.caches(), f.s1.view, f.rows.view, add_dim(f.counts.view)); }},
      {"F13", "commit", "counts", "fewer than B entries", "counts: expected dimension 0 (requests B) >= 2",
       [](Fx& f) { f.kda->commit(f.caches(), f.s1.view, f.rows.view, with_shape(f.counts.view, 0, 1)); }},
      {"F14", "commit", "counts", "not on the weights' device", "counts: expected device cpu",
       [](Fx& f) { f.kda->commit(f.caches(), f.s1.view, f.rows.view, with_device(f.counts.view)); }},
      {"F15", "flush (CUDA)", "pending", "records with more rows than prepare(caches) saw", "pending: expected at most", GPU_ONLY("F15")},

      // ---- helpers -------------------------------------------------------------------------------
      {"H01", "decode_conv_weight", "conv_weight", "missing", "conv_weight: expected a tensor ([3D, 1, W])",
       [](Fx&) { kda::decode_conv_weight(TensorView{}); }},
      {"H02", "decode_conv_weight", "conv_weight", "dtype not f32 / bf16", "conv_weight: expected dtype f32 or bf16",
       [](Fx& f) { kda::decode_conv_weight(with_dtype(f.L.weights().conv_weight, DType::kF64)); }},
      {"H03", "decode_conv_weight", "conv_weight", "rank not 3", "conv_weight: expected rank 3",
       [](Fx& f) { kda::decode_conv_weight(add_dim(f.L.weights().conv_weight)); }},
      {"H04", "decode_conv_weight", "conv_weight", "dim 1 not 1", "dimension 1 (depthwise in-channels) = 1",
       [](Fx& f) { kda::decode_conv_weight(with_shape(f.L.weights().conv_weight, 1, 2)); }},
      {"H05", "decode_conv_weight", "conv_weight", "dim 0 not 3·128·k", "conv_weight: expected dimension 0 = 3·D with D a multiple of 128, got 300",
       [](Fx& f) { kda::decode_conv_weight(with_shape(f.L.weights().conv_weight, 0, 300)); }},
      {"H06", "decode_conv_weight", "conv_weight", "device memory", "conv_weight (decode_conv_weight): expected host memory",
       [](Fx& f) { kda::decode_conv_weight(with_device(f.L.weights().conv_weight)); }},

      // ---- the planner (plan_step): prepare, the first use of a key, plan_for -----------------
      {"P01", "plan_step", "policy", "q outside [1, 16]", "policy for step (record, B=2, q=0): q must be in [1, 16]",
       [](Fx&) { kda::plan_step({StepMode::kRecord, 2, 0}, pol(), shape(), DeviceInfo{}); }},
      {"P02", "plan_step", "policy", "decode with q != 1", "policy for step (decode, B=2, q=2): decode steps have q = 1",
       [](Fx&) { kda::plan_step({StepMode::kDecode, 2, 2}, pol(), shape(), gpu_dev()); }},
      {"P03", "plan_step", "policy", "B < 0", "policy for step (decode, B=-1, q=1): B must be >= 0",
       [](Fx&) { kda::plan_step({StepMode::kDecode, -1, 1}, pol(), shape(), DeviceInfo{}); }},
      {"P04", "plan_step (prepare / first use)", "policy", "gate mode 0 or 1 on a layer without f_b_weight",
       "gate mode 0 (per item) needs f_b_weight, which the layer was built without",
       [](Fx& f) {
         f.L.has_f_b = false;
         PreparedKda k(f.L.weights(), {{StepKey{StepMode::kDecode, 2, 1}, Policy{0, GateMode::kPerItem, Variant::kAuto}}}, true, 0);
         k.prepare(f.caches());
       }},
      {"P05", "plan_step (prepare / first use)", "policy", "a CUDA variant forced on the CPU backend", "variant 'split' needs the CUDA backend; the operands are on the CPU",
       [](Fx& f) {
         PreparedKda k(f.L.weights(), {{StepKey{StepMode::kDecode, 2, 1}, Policy{0, GateMode::kAuto, Variant::kSplit}}}, true, 0);
         k.prepare(f.caches());
       }},
      {"P06", "plan_step (CUDA)", "policy", "W != 4 conv taps", "the CUDA kernels need W = 4 conv taps, the layer has W = 3",
       [](Fx&) { kda::plan_step({StepMode::kDecode, 2, 1}, pol(), shape(4, true, 3), gpu_dev()); }},
      {"P07", "plan_step (CUDA)", "policy", "gate mode 1 (shared) for a key the gate workspace does not hold (not prepared)",
       "gate mode 1 (shared) needs a workspace of 64 rows of fp32 gate logits",
       [](Fx&) { kda::plan_step({StepMode::kDecode, 2, 1}, pol(Variant::kAuto, GateMode::kShared), shape(), gpu_dev()); }},
      {"P15", "plan_step (CUDA)", "policy", "gate mode 1 (shared) with 'ws' forced", "variant 'ws' reads its gate input through its ring in bf16",
       [](Fx&) {
         LayerShape l = shape();
         l.stream_ok = true;
         l.gate_ws_rows = 64;
         kda::plan_step({StepMode::kRecord, 2, 4}, pol(Variant::kWS, GateMode::kShared), l, gpu_dev());
       }},
      {"P08", "plan_step (CUDA)", "policy", "'split' forced without thread-block clusters", "variant 'split' needs thread-block clusters",
       [](Fx&) { kda::plan_step({StepMode::kDecode, 2, 1}, pol(Variant::kSplit), shape(), gpu_dev(false)); }},
      {"P09", "parse_variant", "policy", "'stream' (a variant that was removed)", "policy variant: expected one of auto, cpu, split, wide, ws",
       [](Fx&) { kda::parse_variant("stream"); }},
      {"P10", "plan_step (CUDA)", "policy", "'ws' forced on an append step", "variant 'ws' has no append path",
       [](Fx&) {
         LayerShape l = shape();
         l.stream_ok = true;
         kda::plan_step({StepMode::kAppend, 2, 1}, pol(Variant::kWS), l, gpu_dev());
       }},
      {"P11", "plan_step (CUDA)", "policy", "a variant that is not built on CUDA (cpu)", "variant 'cpu' is not built in this version",
       [](Fx&) { kda::plan_step({StepMode::kDecode, 2, 1}, pol(Variant::kCpu), shape(), gpu_dev()); }},
      {"P13", "plan_step (CUDA)", "policy", "'ws' forced on caches without 16-byte aligned strides", "variant 'ws' needs 16-byte aligned operands",
       [](Fx&) { kda::plan_step({StepMode::kDecode, 2, 1}, pol(Variant::kWS), shape(), gpu_dev()); }},
      {"P14", "plan_step (CUDA)", "policy", "'ws' forced where two ring stages do not fit (or the window is short)", "variant 'ws' needs two ring stages",
       [](Fx&) {
         LayerShape l = shape();
         l.stream_ok = true;
         kda::plan_step({StepMode::kRecord, 2, 4}, pol(Variant::kWS), l, gpu_dev(true, 100 * 1024));
       }},
      {"P12", "plan_step (CUDA)", "policy", "Split / Wide shared memory above the device's limit", "bytes of shared memory, the device allows 1024",
       [](Fx&) { kda::plan_step({StepMode::kRecord, 2, 16}, pol(Variant::kWide), shape(), gpu_dev(true, 1024)); }},
  };
  return r;
}


class ValidationTable : public ::testing::TestWithParam<Row> {};

TEST_P(ValidationTable, Row) {
  const Row& r = GetParam();
  if (!r.trigger) GTEST_SKIP() << r.id << " is checked with the CUDA backend only: " << r.gpu_test;
  Fx f;
  const PoolData snap = f.pool;
  const std::vector<uint16_t> o1 = f.out1.mem, o2 = f.out2.mem;
  const std::string msg = invalid_message([&] { r.trigger(f); });
  if (std::getenv("KDA_TEST_VERBOSE")) std::cout << "  [" << r.id << "] " << msg << "\n";
  EXPECT_THAT(msg, HasSubstr(r.excerpt)) << r.id << " (" << r.condition << ")";
  EXPECT_TRUE(names_word(msg, r.operand)) << r.id << ": the message does not name '" << r.operand << "': " << msg;
  EXPECT_TRUE(snap.conv == f.pool.conv && snap.state == f.pool.state && snap.corr == f.pool.corr && snap.kg == f.pool.kg &&
              snap.pending == f.pool.pending && o1 == f.out1.mem && o2 == f.out2.mem)
      << r.id << ": wrote before throwing";
  EXPECT_TRUE(f.kda->status().ok());
}

INSTANTIATE_TEST_SUITE_P(Rows, ValidationTable, ::testing::ValuesIn(rows()),
                         [](const ::testing::TestParamInfo<Row>& info) { return std::string(info.param.id); });

TEST(ValidationTableDoc, IdsAreUnique) {
  std::set<std::string> ids;
  for (const Row& r : rows()) EXPECT_TRUE(ids.insert(r.id).second) << "duplicate row " << r.id;
}

TEST(ValidationTableDoc, EveryRowIsInTheDoc) {
  // docs/VALIDATION.md lists every row (ID, operand) with the test that covers it
  const std::string path = std::string(KDA_GOLDEN_DIR) + "/../../docs/VALIDATION.md";
  std::ifstream f(path);
  // the table is part of the contract's documentation: a missing file is a failure
  ASSERT_TRUE(f) << "cannot read " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const Row& r : rows()) {
    const std::string cell = std::string("| ") + r.id + " |";
    const size_t at = doc.find(cell);
    ASSERT_NE(at, std::string::npos) << r.id << " is missing from docs/VALIDATION.md";
    const std::string line = doc.substr(at, doc.find('\n', at) - at);
    EXPECT_THAT(line, HasSubstr(std::string("`") + r.operand + "`")) << line;
  }
}

TEST(ValidationTableDoc, PrintMarkdown) {
  if (!std::getenv("KDA_PRINT_VALIDATION_TABLE")) GTEST_SKIP() << "set KDA_PRINT_VALIDATION_TABLE=1 to print the rows";
  for (const Row& r : rows()) {
    std::string test = r.trigger ? std::string("test_validation_table.cpp::Rows/ValidationTable.Row/") + r.id
                                 : std::string(r.gpu_test).substr(std::string("tests/python/").size());
    std::cout << "| " << r.id << " | " << r.api << " | `" << r.operand << "` | " << r.condition << " | `" << r.excerpt
              << "` | " << test << " |\n";
  }
}

}  // namespace
}  // namespace kt
