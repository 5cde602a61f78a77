// src/types.cpp — names, parsing and descriptions of the contract types (kda/types.h).
#include <sstream>
#include <stdexcept>

#include "kda/errors.h"
#include "kda/types.h"

namespace kda {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kBF16:
    case DType::kF16: return 2;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF64:
    case DType::kI64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
  }
  return "?";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

std::string TensorView::describe() const {
  if (!defined()) return "none";
  std::ostringstream os;
  os << "[";
  for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << shape[d];
  os << "] " << dtype_name(dtype) << " strides (";
  for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << strides[d];
  os << ")" << (device == Device::kCUDA ? " cuda" : " cpu");
  return os.str();
}

TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device, int device_id) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.device_id = device_id;
  v.ndim = int(shape.size());
  if (v.ndim > kMaxTensorRank)
    throw ShapeError("make_view shape", "rank <= " + std::to_string(kMaxTensorRank), std::to_string(v.ndim));
  int d = 0;
  for (int64_t s : shape) v.shape[d++] = s;
  int64_t st = 1;
  for (d = v.ndim - 1; d >= 0; --d) {
    v.strides[d] = st;
    st *= v.shape[d];
  }
  return v;
}

TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     std::initializer_list<int64_t> strides, Device device, int device_id) {
  TensorView v = make_view(data, dtype, shape, device, device_id);
  if (strides.size() != shape.size())
    throw ShapeError("make_view strides", std::to_string(shape.size()) + " strides (the rank of the shape)",
                     std::to_string(strides.size()));
  int d = 0;
  for (int64_t s : strides) v.strides[d++] = s;
  return v;
}

const char* mode_name(StepMode m) {
  for (const ModeInfo& i : kModes)
    if (i.mode == m) return i.name;
  return "?";
}

StepMode parse_mode(const std::string& s) {
  std::string names;
  for (const ModeInfo& i : kModes) {
    if (s == i.name) return i.mode;
    names += (names.empty() ? "" : ", ") + std::string(i.name);
  }
  throw ArgumentError("mode", "one of " + names, "'" + s + "'");
}

const char* gate_mode_name(GateMode g) {
  switch (g) {
    case GateMode::kAuto: return "auto";
    case GateMode::kPerItem: return "0 (per item)";
    case GateMode::kShared: return "1 (shared)";
    case GateMode::kPrecomputed: return "2 (precomputed)";
  }
  return "?";
}

GateMode parse_gate_mode(const std::string& s) {
  if (s == "auto" || s == "-1") return GateMode::kAuto;
  if (s == "0" || s == "per_item") return GateMode::kPerItem;
  if (s == "1" || s == "shared") return GateMode::kShared;
  if (s == "2" || s == "precomputed") return GateMode::kPrecomputed;
  throw ArgumentError("gate_mode", "'auto', 0, 1 or 2", "'" + s + "'");
}

const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kAuto: return "auto";
    case Variant::kCpu: return "cpu";
    case Variant::kSplit: return "split";
    case Variant::kWide: return "wide";
    case Variant::kWS: return "ws";
  }
  return "?";
}

Variant parse_variant(const std::string& s) {
  std::string names;
  for (Variant v : kVariants) {
    if (s == variant_name(v)) return v;
    names += (names.empty() ? "" : ", ") + std::string(variant_name(v));
  }
  throw ArgumentError("policy variant", "one of " + names, "'" + s + "'");
}

const char* narrow_form_name(NarrowForm n) {
  switch (n) {
    case NarrowForm::kAuto: return "auto";
    case NarrowForm::kOff: return "off";
    case NarrowForm::kOn: return "on";
  }
  return "?";
}

NarrowForm parse_narrow_form(const std::string& s) {
  for (NarrowForm n : {NarrowForm::kAuto, NarrowForm::kOff, NarrowForm::kOn})
    if (s == narrow_form_name(n)) return n;
  throw ArgumentError("policy narrow", "'auto', 'on' or 'off'", "'" + s + "'");
}

std::string StepKey::describe() const {
  std::ostringstream os;
  os << "(" << mode_name(mode) << ", B=" << B << ", q=" << q << ")";
  return os.str();
}

std::string Status::describe() const {
  if (!flags) return "ok";
  std::ostringstream os;
  const char* names[] = {"SLOT_RANGE", "ROW_RANGE", "ACCEPTED", "PENDING", "PAD_START"};
  bool first = true;
  for (int i = 0; i < 5; ++i)
    if (flags & (1u << i)) {
      os << (first ? "" : "|") << names[i];
      first = false;
    }
  os << " (first request " << first_request << ")";
  return os.str();
}

}  // namespace kda
