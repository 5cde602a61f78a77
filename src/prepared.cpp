// src/prepared.cpp — kda::PreparedKda: host-side validation of every operand (messages name
// the operand, the expected and the actual value), planning per step key, and dispatch of
// steps, commits and flushes to the CPU or CUDA backend. See kda/prepared.h.
#include <climits>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "backend.h"
#include "kda/prepared.h"
#include "kda/request.h"

namespace kda {
namespace {

constexpr int K = kHeadDim;

[[noreturn]] void bad(const std::string& operand, const std::string& expected, const std::string& got) {
  throw std::invalid_argument(operand + ": expected " + expected + ", got " + got);
}

std::string shape_str(const TensorView& t) {
  std::ostringstream os;
  os << "[";
  for (int d = 0; d < t.ndim; ++d) os << (d ? ", " : "") << t.shape[d];
  os << "]";
  return os.str();
}

std::string strides_str(const TensorView& t) {
  std::ostringstream os;
  os << "(";
  for (int d = 0; d < t.ndim; ++d) os << (d ? ", " : "") << t.strides[d];
  os << ")";
  return os.str();
}

std::string device_str(Device d, int id) {
  return d == Device::kCUDA ? "cuda:" + std::to_string(id) : std::string("cpu");
}

void expect_defined(const TensorView& t, const std::string& name, const std::string& why) {
  if (!t.defined()) bad(name, "a tensor (" + why + ")", "none");
}

void expect_dtype(const TensorView& t, const std::string& name, std::initializer_list<DType> ok) {
  for (DType d : ok)
    if (t.dtype == d) return;
  std::string exp;
  for (DType d : ok) exp += (exp.empty() ? "" : " or ") + std::string(dtype_name(d));
  bad(name, "dtype " + exp, dtype_name(t.dtype));
}

void expect_rank(const TensorView& t, const std::string& name, int rank, const std::string& shape_doc) {
  if (t.ndim != rank) bad(name, "rank " + std::to_string(rank) + " " + shape_doc, "rank " + std::to_string(t.ndim) + " " + shape_str(t));
}

void expect_dim(const TensorView& t, const std::string& name, int d, int64_t want, const std::string& what) {
  if (t.shape[d] != want)
    bad(name, "dimension " + std::to_string(d) + " (" + what + ") = " + std::to_string(want),
        std::to_string(t.shape[d]) + " (shape " + shape_str(t) + ")");
}

void expect_dim_at_least(const TensorView& t, const std::string& name, int d, int64_t want, const std::string& what) {
  if (t.shape[d] < want)
    bad(name, "dimension " + std::to_string(d) + " (" + what + ") >= " + std::to_string(want),
        std::to_string(t.shape[d]) + " (shape " + shape_str(t) + ")");
}

void expect_device(const TensorView& t, const std::string& name, Device dev, int id) {
  if (t.device != dev || (dev == Device::kCUDA && t.device_id != id))
    bad(name, "device " + device_str(dev, id) + " (the layer's weights)", device_str(t.device, t.device_id));
}

void expect_unit_inner(const TensorView& t, const std::string& name) {
  if (t.strides[t.ndim - 1] != 1)
    bad(name, "unit inner stride", "strides " + strides_str(t));
}

void expect_aligned(const void* p, std::size_t a, const std::string& name) {
  if (reinterpret_cast<uintptr_t>(p) % a)
    bad(name, std::to_string(a) + "-byte aligned data pointer (the CUDA kernels use vector loads)",
        "an address that is not");
}

/// An int32 vector [>=B] (rank 1, any stride), optional.
void check_index_vector(const TensorView& t, const std::string& name, int64_t B) {
  if (!t.defined()) return;
  expect_dtype(t, name, {DType::kI32});
  expect_rank(t, name, 1, "[>=B]");
  expect_dim_at_least(t, name, 0, B, "requests B");
}

/// Host copy of a view's span (weights only; synchronous).
std::vector<unsigned char> host_span(Backend& be, const TensorView& t, TensorView* host_view) {
  int64_t hi = 0;
  for (int d = 0; d < t.ndim; ++d) hi += (t.shape[d] - 1) * t.strides[d];
  const std::size_t bytes = std::size_t(hi + 1) * dtype_size(t.dtype);
  std::vector<unsigned char> buf(bytes);
  if (t.device == Device::kCPU) std::memcpy(buf.data(), t.data, bytes);
  else be.download(buf.data(), t.data, bytes);
  *host_view = t;
  host_view->data = buf.data();
  host_view->device = Device::kCPU;
  return buf;
}

float load_float(const TensorView& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data) + i * t.strides[0] * int64_t(dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::kF32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::kF64: { double f; std::memcpy(&f, p, 8); return float(f); }
    case DType::kBF16: { uint16_t b; std::memcpy(&b, p, 2); return bf16_to_f32(b); }
    case DType::kF16: {
      uint16_t h; std::memcpy(&h, p, 2);
      const uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
      float v = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(float(m | 1024), int(e) - 25);
      return s ? -v : v;
    }
    default: return 0.f;
  }
}

}  // namespace

// =========================================================================================
// Helpers (SPEC §5)
// =========================================================================================
std::vector<float> decode_conv_weight(const TensorView& w) {
  expect_defined(w, "conv_weight", "[3D, 1, W]");
  expect_dtype(w, "conv_weight", {DType::kF32, DType::kBF16});
  expect_rank(w, "conv_weight", 3, "[3D, 1, W]");
  expect_dim(w, "conv_weight", 1, 1, "depthwise in-channels");
  if (w.shape[0] % 3 || w.shape[0] % (3 * K))
    bad("conv_weight", "dimension 0 = 3·D with D a multiple of 128", std::to_string(w.shape[0]));
  if (w.device != Device::kCPU) bad("conv_weight (decode_conv_weight)", "host memory", "device memory");
  const int64_t D = w.shape[0] / 3, W = w.shape[2];
  std::vector<float> out(size_t(3 * W * D));
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t j = 0; j < W; ++j)
      for (int64_t c = 0; c < D; ++c) {
        const int64_t off = (s * D + c) * w.strides[0] + j * w.strides[2];
        out[size_t((s * W + j) * D + c)] = w.dtype == DType::kF32
                                               ? static_cast<const float*>(w.data)[off]
                                               : bf16_to_f32(static_cast<const uint16_t*>(w.data)[off]);
      }
  return out;
}

std::optional<StreamLayout> stream_layout(const StreamOperands& ops, int q) {
  const TensorView& cs = ops.conv_state;
  if (!cs.defined() || cs.ndim != 3) return std::nullopt;
  const int64_t es = int64_t(dtype_size(cs.dtype));
  const int64_t window = ops.conv_dim_first ? cs.shape[2] : cs.shape[1];
  const int64_t chan_stride = ops.conv_dim_first ? cs.strides[1] : cs.strides[2];
  if (window < ops.W - 2 + q) return std::nullopt;
  if ((cs.strides[0] * es) % 16) return std::nullopt;
  if (ops.conv_dim_first) {
    // DS: each head section (128 channels × window) must be one contiguous run
    if (cs.strides[2] != 1 || cs.strides[1] != window) return std::nullopt;
  } else {
    // SD: a column of 3D channels is contiguous; columns 16-byte aligned
    if (chan_stride != 1 || (cs.strides[1] * es) % 16) return std::nullopt;
  }
  if (ops.input_row_stride_bytes % 16 || ops.out_row_stride_bytes % 16) return std::nullopt;
  if (ops.state.defined() && (ops.state.strides[0] * int64_t(dtype_size(ops.state.dtype))) % 16) return std::nullopt;
  if (reinterpret_cast<uintptr_t>(cs.data) % 16) return std::nullopt;
  return StreamLayout{ops.conv_dim_first, window};
}

int64_t stream_ctas(int64_t items, int sms) {
  if (items <= 0 || sms <= 0) return 0;
  const int64_t slots = 2 * int64_t(sms);
  const int64_t per = (items + slots - 1) / slots;
  return (items + per - 1) / per;
}

bool deferred_supported(const TensorView& state, std::optional<float> lower_bound) {
  (void)lower_bound;  // any gate: records carry the activated gate
  if (!state.defined() || state.ndim != 4) return false;
  if (state.dtype != DType::kF32 && state.dtype != DType::kBF16) return false;
  return state.shape[2] == K && state.shape[3] == K && state.strides[3] == 1 && state.strides[2] == K &&
         state.strides[1] == K * K;
}

bool replays(int H, int B, int q) {
  // Every built variant (Split, Wide) runs the fused verify in one launch, for any shape
  // the planner accepts.
  return H >= 1 && B >= 0 && q >= 1 && q <= kMaxQ;
}

// =========================================================================================
// PreparedKda
// =========================================================================================
struct PreparedKda::Impl {
  LayerWeights w;
  int H = 0, W = 0, D = 0;
  bool conv_dim_first = false;
  int null_slot = 0;
  Policy default_policy;
  std::unordered_map<StepKey, Policy, StepKeyHash> policies;
  std::unordered_map<StepKey, Plan, StepKeyHash> plans;
  /// Stream plans whose run-time inputs turn out not 16-byte aligned run this plan instead.
  std::unordered_map<StepKey, Plan, StepKeyHash> fallback_plans;
  LayerShape planned_for;  // the layer facts the stored plans were made with
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Buffer> conv_w, norm_w, arrivals;
  int64_t arrivals_n = 0;

  void validate_weights(const LayerWeights& lw, bool first);
  void derive(const LayerWeights& lw);
  struct CacheFacts {
    int64_t conv_slots = 0, window = 0, chan_stride = 0, col_stride = 0;
    int64_t rows_r = 0;
    int Qr = 0;
  };
  CacheFacts validate_caches(const Caches& c, bool records, bool pending) const;
  LayerShape layer_shape(const Caches& c) const;
  bool stream_inputs_ok(const InputViews& in, const TensorView& out) const;
  const Plan& plan(const StepKey& key, const Caches& c);
  const Plan& fallback_plan(const StepKey& key, const Plan& stream_plan);
  void step(const InputViews& in, const TensorView& out, const Caches& caches, const StepArgs& a,
            int64_t pitch_seen);
  void fold(const Caches& c, const TensorView& slots, const TensorView& record_rows,
            const TensorView& counts, bool flush, void* stream);
};

void PreparedKda::Impl::validate_weights(const LayerWeights& lw, bool first) {
  // A_log fixes H, conv_weight fixes W; everything else must agree.
  expect_defined(lw.A_log, "A_log", "[H] fp32");
  expect_dtype(lw.A_log, "A_log", {DType::kF32});
  expect_rank(lw.A_log, "A_log", 1, "[H]");
  expect_unit_inner(lw.A_log, "A_log");
  const int h = int(lw.A_log.shape[0]);
  if (h < 1) bad("A_log", "H >= 1 heads", std::to_string(h));
  if (!first && h != H) bad("A_log", "H = " + std::to_string(H) + " (as at construction)", std::to_string(h));
  const int64_t d = int64_t(h) * K;
  const Device dev = lw.A_log.device;
  const int id = lw.A_log.device_id;

  expect_defined(lw.conv_weight, "conv_weight", "[3D, 1, W]");
  expect_dtype(lw.conv_weight, "conv_weight", {DType::kF32, DType::kBF16});
  expect_rank(lw.conv_weight, "conv_weight", 3, "[3D, 1, W]");
  expect_dim(lw.conv_weight, "conv_weight", 0, 3 * d, "3·D = 3·128·H");
  expect_dim(lw.conv_weight, "conv_weight", 1, 1, "depthwise in-channels");
  if (lw.conv_weight.shape[2] < 2) bad("conv_weight", "W >= 2 taps", std::to_string(lw.conv_weight.shape[2]));
  if (!first && lw.conv_weight.shape[2] != W)
    bad("conv_weight", "W = " + std::to_string(W) + " (as at construction)", std::to_string(lw.conv_weight.shape[2]));
  expect_device(lw.conv_weight, "conv_weight", dev, id);

  expect_defined(lw.dt_bias, "dt_bias", "[D] fp32");
  expect_dtype(lw.dt_bias, "dt_bias", {DType::kF32});
  expect_rank(lw.dt_bias, "dt_bias", 1, "[D]");
  expect_dim(lw.dt_bias, "dt_bias", 0, d, "D = 128·H");
  expect_unit_inner(lw.dt_bias, "dt_bias");
  expect_device(lw.dt_bias, "dt_bias", dev, id);

  if (lw.f_b_weight.defined()) {
    expect_dtype(lw.f_b_weight, "f_b_weight", {DType::kBF16});
    expect_rank(lw.f_b_weight, "f_b_weight", 2, "[D, R]");
    expect_dim(lw.f_b_weight, "f_b_weight", 0, d, "D = 128·H");
    expect_dim(lw.f_b_weight, "f_b_weight", 1, kRank, "R = 128");
    expect_unit_inner(lw.f_b_weight, "f_b_weight");
    expect_device(lw.f_b_weight, "f_b_weight", dev, id);
    if (dev == Device::kCUDA) {
      expect_aligned(lw.f_b_weight.data, 16, "f_b_weight");
      if (lw.f_b_weight.strides[0] % 8) bad("f_b_weight", "a row stride that is a multiple of 8 elements (16 bytes) on CUDA", std::to_string(lw.f_b_weight.strides[0]));
    }
  }
  if (lw.conv_bias.defined()) {
    expect_dtype(lw.conv_bias, "conv_bias", {DType::kF32});
    expect_rank(lw.conv_bias, "conv_bias", 1, "[3D]");
    expect_dim(lw.conv_bias, "conv_bias", 0, 3 * d, "3·D");
    expect_unit_inner(lw.conv_bias, "conv_bias");
    expect_device(lw.conv_bias, "conv_bias", dev, id);
  }
  expect_defined(lw.norm_weight, "norm_weight", "[K] float");
  expect_dtype(lw.norm_weight, "norm_weight", {DType::kF32, DType::kBF16, DType::kF16, DType::kF64});
  expect_rank(lw.norm_weight, "norm_weight", 1, "[K]");
  expect_dim(lw.norm_weight, "norm_weight", 0, K, "K = 128");
  expect_device(lw.norm_weight, "norm_weight", dev, id);
  if (!(lw.eps > 0.f)) bad("eps", "a positive RMSNorm epsilon", std::to_string(lw.eps));
  if (lw.lower_bound && !(*lw.lower_bound >= -5.f && *lw.lower_bound < 0.f))
    bad("lower_bound", "none or a value in [-5, 0)", std::to_string(*lw.lower_bound));
}

void PreparedKda::Impl::derive(const LayerWeights& lw) {
  TensorView hv;
  auto conv_host = host_span(*backend, lw.conv_weight, &hv);
  std::vector<float> cw = decode_conv_weight(hv);
  TensorView nv;
  auto norm_host = host_span(*backend, lw.norm_weight, &nv);
  std::vector<float> nw(K);
  for (int i = 0; i < K; ++i) nw[i] = load_float(nv, i);
  if (!conv_w) conv_w = backend->allocate(cw.size() * 4);
  if (!norm_w) norm_w = backend->allocate(K * 4);
  conv_w->upload(cw.data(), cw.size() * 4);
  norm_w->upload(nw.data(), K * 4);
}

PreparedKda::PreparedKda(const LayerWeights& weights,
                         std::unordered_map<StepKey, Policy, StepKeyHash> policies,
                         bool conv_dim_first, int null_slot, Policy default_policy)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.validate_weights(weights, /*first=*/true);
  m.w = weights;
  m.H = int(weights.A_log.shape[0]);
  m.W = int(weights.conv_weight.shape[2]);
  m.D = m.H * K;
  m.conv_dim_first = conv_dim_first;
  if (null_slot < -1) bad("null_slot", "a slot id >= 0, or -1 for none", std::to_string(null_slot));
  m.null_slot = null_slot;
  m.default_policy = default_policy;
  m.policies = std::move(policies);
  for (auto& [key, pol] : m.policies) {
    if (key.q < 1 || key.q > kMaxQ) bad("policies", "step keys with q in [1, 16]", key.describe());
    if ((key.mode == StepMode::kDecode || key.mode == StepMode::kAppend) && key.q != 1)
      bad("policies", "decode and append keys with q = 1", key.describe());
    if (key.B < 0) bad("policies", "step keys with B >= 0", key.describe());
  }
  m.backend = weights.A_log.device == Device::kCUDA ? make_cuda_backend(weights.A_log.device_id)
                                                    : make_cpu_backend();
  m.derive(weights);
}

PreparedKda::~PreparedKda() = default;

void PreparedKda::process_weights_after_loading(const LayerWeights& weights) {
  Impl& m = *impl_;
  m.validate_weights(weights, /*first=*/false);
  if (weights.f_b_weight.defined() != m.w.f_b_weight.defined() ||
      weights.conv_bias.defined() != m.w.conv_bias.defined())
    bad("weights", "the same optional weights as at construction (f_b_weight, conv_bias)",
        "a different set");
  m.w = weights;
  m.derive(weights);
}

PreparedKda::Impl::CacheFacts PreparedKda::Impl::validate_caches(const Caches& c, bool records,
                                                                 bool pending) const {
  const Device dev = w.A_log.device;
  const int id = w.A_log.device_id;
  CacheFacts f;
  // ---- conv window --------------------------------------------------------------------
  const TensorView& cs = c.conv_state;
  const std::string cs_doc = conv_dim_first ? "[slots, 3D, window] (conv_dim_first=True)"
                                            : "[slots, window, 3D] (conv_dim_first=False)";
  expect_defined(cs, "conv_state", cs_doc);
  expect_dtype(cs, "conv_state", {DType::kBF16, DType::kF32});
  expect_rank(cs, "conv_state", 3, cs_doc);
  expect_device(cs, "conv_state", dev, id);
  expect_dim(cs, "conv_state", conv_dim_first ? 1 : 2, 3 * int64_t(D), "3·D channels of " + cs_doc);
  f.conv_slots = cs.shape[0];
  f.window = conv_dim_first ? cs.shape[2] : cs.shape[1];
  f.chan_stride = conv_dim_first ? cs.strides[1] : cs.strides[2];
  f.col_stride = conv_dim_first ? cs.strides[2] : cs.strides[1];
  if (f.window < W - 1)
    bad("conv_state", "window >= W - 1 = " + std::to_string(W - 1) + " columns", std::to_string(f.window));

  // ---- recurrent state ----------------------------------------------------------------
  const TensorView& st = c.state;
  expect_defined(st, "state", "[slots, H, V, K]");
  expect_dtype(st, "state", {DType::kF32, DType::kBF16});
  expect_rank(st, "state", 4, "[slots, H, V, K]");
  expect_device(st, "state", dev, id);
  expect_dim(st, "state", 1, H, "H heads");
  expect_dim(st, "state", 2, K, "V = 128");
  expect_dim(st, "state", 3, K, "K = 128");
  if (st.strides[3] != 1 || st.strides[2] != K || st.strides[1] != K * K)
    bad("state", "inner [H, V, K] dense with K contiguous (strides (slot, 16384, 128, 1): the VK layout; a [K, V] or transposed pool is not supported)",
        "strides " + strides_str(st));
  if (st.strides[0] < int64_t(H) * K * K)
    bad("state", "slot stride >= H·V·K = " + std::to_string(int64_t(H) * K * K), std::to_string(st.strides[0]));
  if (dev == Device::kCUDA) {
    expect_aligned(st.data, 16, "state");
    const int64_t es = int64_t(dtype_size(st.dtype));
    if ((st.strides[0] * es) % 16)
      bad("state", "slot stride a multiple of 16 bytes on CUDA", std::to_string(st.strides[0] * es) + " bytes");
  }

  // ---- records ------------------------------------------------------------------------
  if (records) {
    const TensorView& cr = c.correction;
    const TensorView& kg = c.key_gate;
    expect_defined(cr, "correction", "records [rows_r, H, Qr, V] fp32 for record/fused/append steps");
    expect_defined(kg, "key_gate", "records [rows_r, H, Qr, 2K] fp32 for record/fused/append steps");
    expect_dtype(cr, "correction", {DType::kF32});
    expect_dtype(kg, "key_gate", {DType::kF32});
    expect_rank(cr, "correction", 4, "[rows_r, H, Qr, V]");
    expect_rank(kg, "key_gate", 4, "[rows_r, H, Qr, 2K]");
    expect_device(cr, "correction", dev, id);
    expect_device(kg, "key_gate", dev, id);
    expect_dim(cr, "correction", 1, H, "H heads");
    expect_dim(kg, "key_gate", 1, H, "H heads");
    expect_dim(cr, "correction", 3, K, "V = 128");
    expect_dim(kg, "key_gate", 3, 2 * K, "2K = 256");
    f.rows_r = cr.shape[0];
    f.Qr = int(cr.shape[2]);
    expect_dim(kg, "key_gate", 0, f.rows_r, "rows_r as correction");
    expect_dim(kg, "key_gate", 2, f.Qr, "Qr as correction");
    if (f.Qr < 1) bad("correction", "Qr >= 1", std::to_string(f.Qr));
    if (cr.strides[3] != 1 || cr.strides[2] != K || cr.strides[1] != int64_t(f.Qr) * K)
      bad("correction", "inner [H, Qr, V] dense", "strides " + strides_str(cr));
    if (kg.strides[3] != 1 || kg.strides[2] != 2 * K || kg.strides[1] != int64_t(f.Qr) * 2 * K)
      bad("key_gate", "inner [H, Qr, 2K] dense", "strides " + strides_str(kg));
    if (dev == Device::kCUDA) {
      expect_aligned(cr.data, 16, "correction");
      expect_aligned(kg.data, 16, "key_gate");
      if (cr.strides[0] % 4) bad("correction", "row stride a multiple of 4 elements on CUDA", std::to_string(cr.strides[0]));
      if (kg.strides[0] % 4) bad("key_gate", "row stride a multiple of 4 elements on CUDA", std::to_string(kg.strides[0]));
    }
  }
  if (pending) {
    const TensorView& pd = c.pending;
    expect_defined(pd, "pending", "[rows_r] int32 for fused/append steps and flush");
    expect_dtype(pd, "pending", {DType::kI32});
    expect_rank(pd, "pending", 1, "[rows_r]");
    expect_device(pd, "pending", dev, id);
    if (records || c.correction.defined()) expect_dim(pd, "pending", 0, c.correction.shape[0], "rows_r as the records");
  }
  return f;
}

LayerShape PreparedKda::Impl::layer_shape(const Caches& c) const {
  LayerShape ls;
  ls.H = H;
  ls.W = W;
  ls.state_bf16 = c.state.defined() && c.state.dtype == DType::kBF16;
  ls.has_f_b = w.f_b_weight.defined();
  const TensorView& cs = c.conv_state;
  if (cs.defined() && cs.ndim == 3) {
    ls.window = int(conv_dim_first ? cs.shape[2] : cs.shape[1]);
    ls.conv_bytes = int(dtype_size(cs.dtype));
    ls.records = c.correction.defined() && c.correction.ndim == 4 ? int(c.correction.shape[2]) : 0;
    // caches side of stream_layout (the inputs are checked per run: Impl::stream_inputs_ok)
    StreamOperands ops;
    ops.conv_state = cs;
    ops.state = c.state;
    ops.conv_dim_first = conv_dim_first;
    ops.W = W;
    ls.stream_ok = stream_layout(ops, 1).has_value() && reinterpret_cast<uintptr_t>(c.state.data) % 16 == 0;
    // records rows are copied in 16-byte pieces too (fused mode)
    for (const TensorView* r : {&c.correction, &c.key_gate})
      if (r->defined() && (reinterpret_cast<uintptr_t>(r->data) % 16 || (r->strides[0] * 4) % 16)) ls.stream_ok = false;
  }
  return ls;
}

bool PreparedKda::Impl::stream_inputs_ok(const InputViews& in, const TensorView& out) const {
  for (const TensorView* t : {&in.qkv, &in.gate_in, &in.out_gate})
    if (reinterpret_cast<uintptr_t>(t->data) % 16 || (t->strides[0] * 2) % 16) return false;
  (void)out;  // out is written with plain stores
  return true;
}

const Plan& PreparedKda::Impl::plan(const StepKey& key, const Caches& c) {
  const LayerShape ls = layer_shape(c);
  if (ls.state_bf16 != planned_for.state_bf16 || ls.stream_ok != planned_for.stream_ok ||
      ls.window != planned_for.window || ls.conv_bytes != planned_for.conv_bytes || ls.records != planned_for.records) {
    plans.clear();  // cache facts changed: plan again (host work only)
    fallback_plans.clear();
    planned_for = ls;
  }
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  auto pit = policies.find(key);
  const Policy& pol = pit != policies.end() ? pit->second : default_policy;
  Plan p = plan_step(key, pol, ls, backend->info());
  backend->prepare_plan(p);
  return plans.emplace(key, p).first->second;
}

const Plan& PreparedKda::Impl::fallback_plan(const StepKey& key, const Plan& stream_plan) {
  auto it = fallback_plans.find(key);
  if (it != fallback_plans.end()) return it->second;
  LayerShape ls = planned_for;
  ls.stream_ok = false;
  Policy pol;
  pol.pitch = stream_plan.pitch;
  pol.gate_mode = stream_plan.gate_mode;
  Plan p = plan_step(key, pol, ls, backend->info());
  backend->prepare_plan(p);
  return fallback_plans.emplace(key, p).first->second;
}

void PreparedKda::prepare(const Caches& caches) {
  Impl& m = *impl_;
  bool any_records = false, any_fused = false;
  for (auto& [key, pol] : m.policies) {
    any_records |= key.mode == StepMode::kRecord || key.mode == StepMode::kFused || key.mode == StepMode::kAppend;
    any_fused |= key.mode == StepMode::kFused || key.mode == StepMode::kAppend;
  }
  const bool records = any_records || caches.correction.defined() || caches.key_gate.defined();
  const bool pending = any_fused || caches.pending.defined();
  auto facts = m.validate_caches(caches, records, pending);
  m.plans.clear();
  m.planned_for = m.layer_shape(caches);
  for (auto& [key, pol] : m.policies) {
    if (key.q + m.W - 2 > facts.window)
      bad("conv_state", "window >= W - 2 + q = " + std::to_string(key.q + m.W - 2) + " for step " + key.describe(),
          std::to_string(facts.window));
    if (records && (key.mode == StepMode::kRecord || key.mode == StepMode::kFused || key.mode == StepMode::kAppend) &&
        key.q > facts.Qr)
      bad("correction", "Qr >= q = " + std::to_string(key.q) + " for step " + key.describe(), std::to_string(facts.Qr));
    m.plan(key, caches);
  }
  if (pending && m.backend->device() == Device::kCUDA && facts.rows_r > m.arrivals_n) {
    m.arrivals = m.backend->allocate(size_t(facts.rows_r) * 4);
    std::vector<int32_t> zeros(size_t(facts.rows_r), 0);
    m.arrivals->upload(zeros.data(), zeros.size() * 4);
    m.arrivals_n = facts.rows_r;
  }
}

const Plan& PreparedKda::plan_for(const StepKey& key, const Caches& caches) {
  return impl_->plan(key, caches);
}

void PreparedKda::Impl::step(const InputViews& in, const TensorView& out, const Caches& caches,
                             const StepArgs& a, int64_t pitch_seen) {
  const Device dev = w.A_log.device;
  const int id = w.A_log.device_id;
  if (a.q < 1 || a.q > kMaxQ) bad("q", "tokens per request in [1, 16]", std::to_string(a.q));
  if ((a.mode == StepMode::kDecode || a.mode == StepMode::kAppend) && a.q != 1)
    bad("q", std::string("1 for ") + mode_name(a.mode) + " steps", std::to_string(a.q));

  // ---- rows and B ---------------------------------------------------------------------
  const int64_t rows = in.qkv.shape[0];
  if (rows % a.q) bad("inputs", "rows = B·q with q = " + std::to_string(a.q), std::to_string(rows) + " rows");
  const int64_t B = rows / a.q;
  if (B > INT32_MAX / 2) bad("inputs", "fewer than 2^30 requests", std::to_string(B));
  const StepKey key{a.mode, int(B), a.q};
  const bool records = a.mode == StepMode::kRecord || a.mode == StepMode::kFused || a.mode == StepMode::kAppend;
  const bool fused = a.mode == StepMode::kFused || a.mode == StepMode::kAppend;  // read and write pending
  auto facts = validate_caches(caches, records, fused);
  const Plan* plp = &plan(key, caches);
  if (plp->variant == Variant::kWS && !stream_inputs_ok(in, out))
    plp = &fallback_plan(key, *plp);
  const Plan& pl = *plp;
  const int gm = int(pl.gate_mode);

  // ---- input views --------------------------------------------------------------------
  struct V { const TensorView* t; const char* name; int64_t cols; };
  const int64_t gate_cols = gm == int(GateMode::kPrecomputed) ? D : kRank;
  for (V v : {V{&in.qkv, "qkv", 3 * int64_t(D)}, V{&in.out_gate, "out_gate", D}, V{&in.gate_in, "gate_in", gate_cols},
              V{&in.beta, "beta", H}}) {
    expect_defined(*v.t, v.name, "a [rows, cols] bf16 input");
    expect_dtype(*v.t, v.name, {DType::kBF16});
    expect_rank(*v.t, v.name, 2, "[rows, " + std::to_string(v.cols) + "]");
    expect_device(*v.t, v.name, dev, id);
    expect_dim(*v.t, v.name, 0, rows, "rows as qkv");
    if (v.t->shape[1] != v.cols)
      bad(v.name, std::to_string(v.cols) + " columns" +
                      (v.t == &in.gate_in ? std::string(" for gate mode ") + gate_mode_name(pl.gate_mode) : std::string()),
          std::to_string(v.t->shape[1]));
    expect_unit_inner(*v.t, v.name);
    if (rows > 1 && v.t->strides[0] < 0) bad(v.name, "a non-negative row stride", std::to_string(v.t->strides[0]));
  }
  if (pl.pitch != 0 && pitch_seen >= 0 && pitch_seen != pl.pitch)
    bad("projected", "row pitch " + std::to_string(pl.pitch) + " (the policy of step " + key.describe() + ")",
        std::to_string(pitch_seen));
  expect_defined(out, "out", "[rows, D] bf16");
  expect_dtype(out, "out", {DType::kBF16});
  expect_rank(out, "out", 2, "[rows, D]");
  expect_device(out, "out", dev, id);
  expect_dim(out, "out", 0, rows, "rows = B·q");
  expect_dim(out, "out", 1, D, "D = 128·H");
  expect_unit_inner(out, "out");
  if (rows > 1 && out.strides[0] < D) bad("out", "row stride >= D = " + std::to_string(D), std::to_string(out.strides[0]));

  // ---- slot tensors -------------------------------------------------------------------
  const TensorView& sl = a.slots;
  expect_defined(sl, "slots", "int32 slot ids");
  expect_dtype(sl, "slots", {DType::kI32});
  expect_device(sl, "slots", dev, id);
  if (a.mode == StepMode::kPerToken) {
    if (sl.ndim == 1 && a.q != 1) bad("slots", "rank 2 [>=B, >=q] for per_token steps", "rank 1 " + shape_str(sl));
    if (sl.ndim != 1 && sl.ndim != 2) bad("slots", "rank 2 [>=B, >=q]", "rank " + std::to_string(sl.ndim));
    expect_dim_at_least(sl, "slots", 0, B, "requests B");
    if (sl.ndim == 2) expect_dim_at_least(sl, "slots", 1, a.q, "tokens q (state after token t goes to column t)");
  } else {
    if (sl.ndim != 1 && sl.ndim != 2)
      bad("slots", std::string("rank 1 [>=B] (or [>=B, >=1]) for ") + mode_name(a.mode) + " steps", "rank " + std::to_string(sl.ndim));
    expect_dim_at_least(sl, "slots", 0, B, "requests B");
    if (sl.ndim == 2) expect_dim_at_least(sl, "slots", 1, 1, "one slot per request");
  }
  check_index_vector(a.accepted, "accepted", B);
  if (a.out_slots.defined() && a.mode != StepMode::kDecode)
    bad("out_slots", "none for " + std::string(mode_name(a.mode)) + " steps (decode only)", a.out_slots.describe());
  check_index_vector(a.out_slots, "out_slots", B);
  if (a.record_rows.defined() && !records)
    bad("record_rows", "none for " + std::string(mode_name(a.mode)) + " steps (record/fused/append only)", a.record_rows.describe());
  check_index_vector(a.record_rows, "record_rows", B);
  if (a.accepted.defined()) expect_device(a.accepted, "accepted", dev, id);
  if (a.out_slots.defined()) expect_device(a.out_slots, "out_slots", dev, id);
  if (a.record_rows.defined()) expect_device(a.record_rows, "record_rows", dev, id);
  if (facts.window < W - 2 + a.q)
    bad("conv_state", "window >= W - 2 + q = " + std::to_string(W - 2 + a.q), std::to_string(facts.window));
  if (records && a.q > facts.Qr) bad("correction", "Qr >= q = " + std::to_string(a.q), std::to_string(facts.Qr));
  if (fused && dev == Device::kCUDA && facts.rows_r > arrivals_n)
    bad("pending", "at most " + std::to_string(arrivals_n) + " records rows (call prepare(caches) with these caches first)",
        std::to_string(facts.rows_r));
  if (B == 0) return;  // rows = 0 is a no-op (SPEC §4)

  // ---- params -------------------------------------------------------------------------
  StepParams p;
  p.mode = int(a.mode);
  p.B = int(B);
  p.q = a.q;
  p.H = H;
  p.W = W;
  p.gate_mode = gm;
  p.null_slot = null_slot;
  p.has_lower_bound = w.lower_bound.has_value();
  p.lower_bound = w.lower_bound.value_or(0.f);
  p.eps = w.eps;
  p.qkv = static_cast<const uint16_t*>(in.qkv.data);
  p.qkv_row = in.qkv.strides[0];
  p.out_gate = static_cast<const uint16_t*>(in.out_gate.data);
  p.out_gate_row = in.out_gate.strides[0];
  p.gate_in = static_cast<const uint16_t*>(in.gate_in.data);
  p.gate_in_row = in.gate_in.strides[0];
  p.beta = static_cast<const uint16_t*>(in.beta.data);
  p.beta_row = in.beta.strides[0];
  p.out = static_cast<uint16_t*>(out.data);
  p.out_row = out.strides[0];
  p.conv = caches.conv_state.data;
  p.conv_f32 = caches.conv_state.dtype == DType::kF32;
  p.window = int(facts.window);
  p.conv_slots = facts.conv_slots;
  p.conv_slot_stride = caches.conv_state.strides[0];
  p.conv_chan_stride = facts.chan_stride;
  p.conv_col_stride = facts.col_stride;
  p.state = caches.state.data;
  p.state_bf16 = caches.state.dtype == DType::kBF16;
  p.state_slots = caches.state.shape[0];
  p.state_slot_stride = caches.state.strides[0];
  p.slots = static_cast<const int32_t*>(sl.data);
  p.slots_stride0 = sl.strides[0];
  p.slots_stride1 = sl.ndim == 2 ? sl.strides[1] : 0;
  p.slots_cols = sl.ndim == 2 ? int(std::min<int64_t>(sl.shape[1], INT32_MAX)) : 1;
  p.out_slots = static_cast<const int32_t*>(a.out_slots.data);
  p.out_slots_stride = a.out_slots.defined() ? a.out_slots.strides[0] : 0;
  p.accepted = static_cast<const int32_t*>(a.accepted.data);
  p.accepted_stride = a.accepted.defined() ? a.accepted.strides[0] : 0;
  p.record_rows = static_cast<const int32_t*>(a.record_rows.data);
  p.record_rows_stride = a.record_rows.defined() ? a.record_rows.strides[0] : 0;
  if (records) {
    p.correction = static_cast<float*>(caches.correction.data);
    p.correction_row = caches.correction.strides[0];
    p.key_gate = static_cast<float*>(caches.key_gate.data);
    p.key_gate_row = caches.key_gate.strides[0];
    p.record_rows_n = facts.rows_r;
    p.Qr = facts.Qr;
  }
  if (fused) {
    p.pending = static_cast<int32_t*>(caches.pending.data);
    p.pending_stride = caches.pending.strides[0];
    p.arrivals = arrivals ? static_cast<int32_t*>(arrivals->data()) : nullptr;
  }
  p.conv_w = static_cast<const float*>(conv_w->data());
  p.conv_b = static_cast<const float*>(w.conv_bias.data);
  p.f_b = static_cast<const uint16_t*>(w.f_b_weight.data);
  p.f_b_row = w.f_b_weight.defined() ? w.f_b_weight.strides[0] : 0;
  p.A_log = static_cast<const float*>(w.A_log.data);
  p.dt_bias = static_cast<const float*>(w.dt_bias.data);
  p.norm_w = static_cast<const float*>(norm_w->data());
  p.error_flags = backend->error_flags();
  p.error_index = backend->error_index();
  p.items_per_cta = pl.items_per_cta;
  p.ring_stages = pl.ring_stages;
  p.conv_dim_first = conv_dim_first;
  backend->step(p, pl, a.stream);
}

void PreparedKda::run(const TensorView& projected, const TensorView& out, const Caches& caches,
                      const StepArgs& args) {
  Impl& m = *impl_;
  expect_defined(projected, "projected", "[rows, pitch] bf16");
  expect_dtype(projected, "projected", {DType::kBF16});
  expect_rank(projected, "projected", 2, "[rows, pitch]");
  expect_unit_inner(projected, "projected");
  const int64_t rows = projected.shape[0];
  const int64_t q = std::max(1, args.q);
  const StepKey key{args.mode, int(rows / q), int(q)};
  if (args.q < 1 || args.q > kMaxQ) bad("q", "tokens per request in [1, 16]", std::to_string(args.q));
  const Plan& pl = m.plan(key, caches);
  const bool pre = pl.gate_mode == GateMode::kPrecomputed;
  const int64_t D = m.D;
  const int64_t gate_cols = pre ? D : kRank;
  const int64_t need = 4 * D + gate_cols + m.H;
  if (projected.shape[1] < need)
    bad("projected", "at least 4D + " + std::string(pre ? "D" : "R") + " + H = " + std::to_string(need) +
                         " columns (gate mode " + gate_mode_name(pl.gate_mode) + ")",
        std::to_string(projected.shape[1]));
  if (rows > 1 && projected.strides[0] < projected.shape[1])
    bad("projected", "row pitch >= its " + std::to_string(projected.shape[1]) + " columns", std::to_string(projected.strides[0]));
  auto slice = [&](int64_t c0, int64_t n) {
    TensorView v = projected;
    v.data = static_cast<uint16_t*>(projected.data) + c0;
    v.shape[1] = n;
    return v;
  };
  InputViews in;
  in.qkv = slice(0, 3 * D);
  in.out_gate = slice(3 * D, D);
  in.gate_in = slice(4 * D, gate_cols);
  in.beta = slice(4 * D + gate_cols, m.H);
  m.step(in, out, caches, args, projected.strides[0]);
}

void PreparedKda::run_views(const InputViews& in, const TensorView& out, const Caches& caches,
                            const StepArgs& args) {
  expect_defined(in.qkv, "qkv", "[rows, 3D] bf16");
  if (in.qkv.ndim != 2) bad("qkv", "rank 2 [rows, 3D]", "rank " + std::to_string(in.qkv.ndim));
  impl_->step(in, out, caches, args, -1);
}

void PreparedKda::Impl::fold(const Caches& c, const TensorView& slots, const TensorView& record_rows,
                             const TensorView& counts, bool flush, void* stream) {
  const Device dev = w.A_log.device;
  const int id = w.A_log.device_id;
  auto facts = validate_caches(c, /*records=*/true, /*pending=*/flush);
  expect_defined(slots, "slots", "[B] int32 checkpoint slots");
  expect_dtype(slots, "slots", {DType::kI32});
  expect_device(slots, "slots", dev, id);
  if (slots.ndim != 1 && slots.ndim != 2) bad("slots", "rank 1 [B] (or [B, >=1])", "rank " + std::to_string(slots.ndim));
  if (slots.ndim == 2) expect_dim_at_least(slots, "slots", 1, 1, "one slot per request");
  const int64_t B = slots.shape[0];
  check_index_vector(record_rows, "record_rows", B);
  if (record_rows.defined()) expect_device(record_rows, "record_rows", dev, id);
  if (!flush) {
    expect_defined(counts, "counts", "[>=B] int32 fold counts");
    check_index_vector(counts, "counts", B);
    expect_device(counts, "counts", dev, id);
  }
  if (flush && dev == Device::kCUDA && facts.rows_r > arrivals_n)
    bad("pending", "at most " + std::to_string(arrivals_n) + " records rows (call prepare(caches) with these caches first)",
        std::to_string(facts.rows_r));
  if (B == 0) return;
  CommitParams p;
  p.B = int(B);
  p.H = H;
  p.null_slot = null_slot;
  p.slots = static_cast<const int32_t*>(slots.data);
  p.slots_stride0 = slots.strides[0];
  p.record_rows = static_cast<const int32_t*>(record_rows.data);
  p.record_rows_stride = record_rows.defined() ? record_rows.strides[0] : 0;
  p.counts = flush ? nullptr : static_cast<const int32_t*>(counts.data);
  p.counts_stride = flush ? 0 : counts.strides[0];
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
    p.arrivals = arrivals ? static_cast<int32_t*>(arrivals->data()) : nullptr;
  }
  p.error_flags = backend->error_flags();
  p.error_index = backend->error_index();
  backend->commit(p, stream);
}

void PreparedKda::commit(const Caches& caches, const TensorView& slots, const TensorView& record_rows,
                         const TensorView& counts, void* stream) {
  impl_->fold(caches, slots, record_rows, counts, /*flush=*/false, stream);
}

void PreparedKda::flush(const Caches& caches, const TensorView& slots, const TensorView& record_rows,
                        void* stream) {
  impl_->fold(caches, slots, record_rows, TensorView{}, /*flush=*/true, stream);
}

Status PreparedKda::status(void* stream) { return impl_->backend->read_status(stream); }

int PreparedKda::heads() const { return impl_->H; }
int PreparedKda::taps() const { return impl_->W; }
Device PreparedKda::device() const { return impl_->backend->device(); }
const DeviceInfo& PreparedKda::device_info() const { return impl_->backend->info(); }

}  // namespace kda
