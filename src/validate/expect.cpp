// src/validate/expect.cpp — the operand checks of expect.h.
#include "validate/expect.h"

#include <sstream>

namespace kda::validate {

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

void expect_defined(const TensorView& t, const std::string& name, const std::string& what) {
  if (!t.defined()) throw ArgumentError(name, "a tensor (" + what + ")", "none");
}

void expect_dtype(const TensorView& t, const std::string& name, std::initializer_list<DType> ok) {
  for (DType d : ok)
    if (t.dtype == d) return;
  std::string exp;
  for (DType d : ok) exp += (exp.empty() ? "" : " or ") + std::string(dtype_name(d));
  throw DTypeError(name, "dtype " + exp, dtype_name(t.dtype));
}

void expect_rank(const TensorView& t, const std::string& name, int rank, const std::string& shape_doc) {
  if (t.ndim != rank)
    throw ShapeError(name, "rank " + std::to_string(rank) + " " + shape_doc,
                     "rank " + std::to_string(t.ndim) + " " + shape_str(t));
}

void expect_dim(const TensorView& t, const std::string& name, int d, int64_t want, const std::string& what) {
  if (t.shape[d] != want)
    throw ShapeError(name, "dimension " + std::to_string(d) + " (" + what + ") = " + std::to_string(want),
                     std::to_string(t.shape[d]) + " (shape " + shape_str(t) + ")");
}

void expect_dim_at_least(const TensorView& t, const std::string& name, int d, int64_t want, const std::string& what) {
  if (t.shape[d] < want)
    throw ShapeError(name, "dimension " + std::to_string(d) + " (" + what + ") >= " + std::to_string(want),
                     std::to_string(t.shape[d]) + " (shape " + shape_str(t) + ")");
}

void expect_device(const TensorView& t, const std::string& name, Place place) {
  if (t.device != place.device || (place.device == Device::kCUDA && t.device_id != place.id))
    throw DeviceError(name, "device " + device_str(place.device, place.id) + " (the layer's weights)",
                      device_str(t.device, t.device_id));
}

void expect_unit_inner(const TensorView& t, const std::string& name) {
  if (t.strides[t.ndim - 1] != 1) throw LayoutError(name, "unit inner stride", "strides " + strides_str(t));
}

void expect_aligned(const void* p, std::size_t bytes, const std::string& name) {
  if (reinterpret_cast<uintptr_t>(p) % bytes)
    throw LayoutError(name, std::to_string(bytes) + "-byte aligned data pointer (the CUDA kernels use vector loads)",
                      "an address that is not");
}

void expect_index_vector(const TensorView& t, const std::string& name, int64_t B, Place place) {
  if (!t.defined()) return;
  expect_dtype(t, name, {DType::kI32});
  expect_rank(t, name, 1, "[>=B]");
  expect_dim_at_least(t, name, 0, B, "requests B");
  expect_device(t, name, place);
}

}  // namespace kda::validate
