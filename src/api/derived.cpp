// src/api/derived.cpp — the derived weight copies (derived.h).
#include "api/derived.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kda/helpers.h"
#include "kda/numerics.h"

namespace kda::api {
namespace {

constexpr int K = kHeadDim;

/// Host copy of a view's span (weights only; synchronous).
std::vector<unsigned char> host_span(Backend& be, const TensorView& t, TensorView* host_view) {
  int64_t hi = 0;
  for (int d = 0; d < t.ndim; ++d) hi += (t.shape[d] - 1) * t.strides[d];
  const std::size_t bytes = std::size_t(hi + 1) * dtype_size(t.dtype);
  std::vector<unsigned char> buf(bytes);
  if (t.device == Device::kCPU)
    std::memcpy(buf.data(), t.data, bytes);
  else
    be.download(buf.data(), t.data, bytes);
  *host_view = t;
  host_view->data = buf.data();
  host_view->device = Device::kCPU;
  return buf;
}

float f16_to_f32(uint16_t h) {
  const uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
  const float v = e == 0    ? std::ldexp(float(m), -24)
                  : e == 31 ? (m ? NAN : INFINITY)
                            : std::ldexp(float(m | 1024), int(e) - 25);
  return s ? -v : v;
}

/// Element i of a rank-1 float view of any float dtype, as fp32.
float load_float(const TensorView& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data) + i * t.strides[0] * int64_t(dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kF64: {
      double f;
      std::memcpy(&f, p, 8);
      return float(f);
    }
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16_to_f32(b);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_to_f32(h);
    }
    default: return 0.f;
  }
}

}  // namespace

void DerivedWeights::derive(Backend& backend, const LayerWeights& w) {
  TensorView conv_view;
  const auto conv_host = host_span(backend, w.conv_weight, &conv_view);
  const std::vector<float> cw = decode_conv_weight(conv_view);
  // Without the output norm (SPEC §9) no step applies the norm weight, but the persistent
  // kernels load it with the other per-head weights before they test the mode: ones keep that
  // load a valid read of a defined copy.
  std::vector<float> nw(K, 1.0f);
  if (w.output_norm && w.norm_weight.defined()) {
    TensorView norm_view;
    const auto norm_host = host_span(backend, w.norm_weight, &norm_view);
    for (int i = 0; i < K; ++i) nw[i] = load_float(norm_view, i);
  }
  if (!conv_w_) conv_w_ = backend.allocate(cw.size() * 4);
  if (!norm_w_) norm_w_ = backend.allocate(K * 4);
  conv_w_->upload(cw.data(), cw.size() * 4);
  norm_w_->upload(nw.data(), K * 4);
}

}  // namespace kda::api
