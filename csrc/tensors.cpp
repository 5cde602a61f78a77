// csrc/tensors.cpp — DLPack tensors (numpy, torch, anything exporting __dlpack__ or the
// buffer protocol) as kda::TensorView, with no copy (core.h). dtype mapping:
//   DLPack bfloat16            -> bf16
//   uint16                     -> bf16 (numpy has no bfloat16: a uint16 array is taken as
//                                 bf16 bit patterns)
//   float16 / float32 / float64 -> f16 / f32 / f64
//   int32 / int64              -> i32 / i64
// Anything else (bool, int8, complex, ...) raises DTypeError naming the operand. Devices:
// kDLCPU (and kDLCUDAHost, pinned host memory) -> CPU, kDLCUDA -> CUDA with the device id;
// others raise DeviceError. Operands the step writes must be writable arrays.
#include <algorithm>

#include "core.h"

namespace kda_py {
namespace {

// DLPack device types (dlpack.h): kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3.
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;

std::string dlpack_dtype_name(const nb::dlpack::dtype& d) {
  using C = nb::dlpack::dtype_code;
  std::string base;
  switch (C(d.code)) {
    case C::Int: base = "int"; break;
    case C::UInt: base = "uint"; break;
    case C::Float: base = "float"; break;
    case C::Bfloat: base = "bfloat"; break;
    case C::Complex: base = "complex"; break;
    case C::Bool: return "bool";
    default: base = "code" + std::to_string(int(d.code)) + "_"; break;
  }
  std::string s = base + std::to_string(int(d.bits));
  if (d.lanes != 1) s += "x" + std::to_string(int(d.lanes));
  return s;
}

kda::DType map_dtype(const nb::dlpack::dtype& d, const char* name) {
  using C = nb::dlpack::dtype_code;
  if (d.lanes == 1) {
    if (d.code == uint8_t(C::Bfloat) && d.bits == 16) return kda::DType::kBF16;
    if (d.code == uint8_t(C::UInt) && d.bits == 16) return kda::DType::kBF16;  // bf16 bit patterns
    if (d.code == uint8_t(C::Float) && d.bits == 16) return kda::DType::kF16;
    if (d.code == uint8_t(C::Float) && d.bits == 32) return kda::DType::kF32;
    if (d.code == uint8_t(C::Float) && d.bits == 64) return kda::DType::kF64;
    if (d.code == uint8_t(C::Int) && d.bits == 32) return kda::DType::kI32;
    if (d.code == uint8_t(C::Int) && d.bits == 64) return kda::DType::kI64;
  }
  throw kda::DTypeError(name,
                        "a supported dtype (bfloat16 or uint16 bf16 bit patterns, float16, float32, float64, int32, "
                        "int64)",
                        dlpack_dtype_name(d));
}

template <class Arr>
kda::TensorView view_of(const Arr& a, const char* name) {
  kda::TensorView v;
  const size_t nd = a.ndim();
  if (nd > size_t(kda::kMaxTensorRank))
    throw kda::ShapeError(name, "rank <= " + std::to_string(kda::kMaxTensorRank), "rank " + std::to_string(nd));
  v.dtype = map_dtype(a.dtype(), name);
  const int dt = a.device_type();
  if (dt == kDLCPU || dt == kDLCUDAHost) {
    v.device = kda::Device::kCPU;
    v.device_id = 0;
  } else if (dt == kDLCUDA) {
    v.device = kda::Device::kCUDA;
    v.device_id = a.device_id();
  } else {
    throw kda::DeviceError(name, "a CPU or CUDA tensor", "DLPack device type " + std::to_string(dt));
  }
  v.ndim = int(nd);
  bool empty = false;
  for (size_t d = 0; d < nd; ++d) {
    v.shape[d] = int64_t(a.shape(d));
    v.strides[d] = a.stride(d);
    empty |= v.shape[d] == 0;
  }
  // A zero-size tensor has no elements, so its strides address nothing; exporters report
  // anything there (numpy: zeros). Give it row-major strides so the layout checks (unit
  // inner stride, dense state) see a well-formed empty tensor (rows = 0 is a no-op).
  if (empty) {
    int64_t st = 1;
    for (int d = int(nd) - 1; d >= 0; --d) {
      v.strides[d] = st;
      st *= std::max<int64_t>(v.shape[d], 1);
    }
  }
  v.data = const_cast<void*>(static_cast<const void*>(a.data()));
  // A zero-size tensor may carry a null data pointer: give the view a non-null dummy so that
  // "defined" still means "given" (nothing is ever read from a zero-size tensor).
  if (!v.data) {
    static int64_t dummy[2] = {0, 0};
    v.data = dummy;
  }
  return v;
}

[[noreturn]] void not_importable(nb::handle obj, const char* name, bool writable) {
  throw kda::DTypeError(name,
                        std::string("a tensor exporting DLPack (numpy array, torch tensor, ...)") +
                            (writable ? " that is writable" : "") +
                            " (torch tensors that require grad must be detached)",
                        py_type_name(obj));
}

}  // namespace

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::type_name(h.type())); }

/// A Python tensor as a view; None -> an undefined view (the validator says whether that is allowed).
kda::TensorView to_view(nb::handle obj, const char* name, bool writable, Keep& keep) {
  if (obj.is_none()) return kda::TensorView{};
  if (writable) {
    nb::ndarray<> a;
    if (nb::try_cast(obj, a, false)) {
      keep.rw.push_back(a);
      return view_of(a, name);
    }
    nb::ndarray<nb::ro> r;
    if (nb::try_cast(obj, r, false))
      throw kda::ArgumentError(name, "a writable tensor (the step writes it)", "a read-only one");
    not_importable(obj, name, true);
  }
  nb::ndarray<nb::ro> a;
  if (!nb::try_cast(obj, a, false)) not_importable(obj, name, false);
  keep.ro.push_back(a);
  return view_of(a, name);
}

}  // namespace kda_py
