// csrc/core.h — what the files of the nanobind extension `kda_decode._core` share: DLPack
// tensors as kda::TensorView (tensors.cpp), the argument classes (arguments.cpp) and the
// binders of each part (arguments.cpp, bindings.cpp). Internal to the extension.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kda/prepared.h"

namespace kda_py {

namespace nb = nanobind;

/// Keeps the imported DLPack handles alive for the duration of one call.
struct Keep {
  std::vector<nb::ndarray<nb::ro>> ro;
  std::vector<nb::ndarray<>> rw;
};

std::string py_type_name(nb::handle h);
/// A Python tensor as a view (no copy); None -> an undefined view (the validator says
/// whether that is allowed). Raises DTypeError / DeviceError / ShapeError / ArgumentError.
kda::TensorView to_view(nb::handle obj, const char* name, bool writable, Keep& keep);
inline kda::TensorView in_view(nb::handle obj, const char* name, Keep& keep) { return to_view(obj, name, false, keep); }
inline kda::TensorView out_view(nb::handle obj, const char* name, Keep& keep) { return to_view(obj, name, true, keep); }

/// kda::Caches as Python objects (the tensors, kept alive by the object).
struct PyCaches {
  nb::object conv_state, state, correction, key_gate, pending;
  kda::Caches views(Keep& keep) const;
};

/// kda::StepArgs as Python objects.
struct PyStepArgs {
  nb::object slots;
  int q = 1;
  std::string mode = "decode";
  nb::object accepted, out_slots, record_rows;
  uintptr_t stream = 0;
  kda::StepArgs views(Keep& keep) const;
};

kda::GateMode gate_mode_of(nb::handle g);
nb::object gate_mode_py(kda::GateMode g);

void bind_errors(nb::module_& m);
void bind_arguments(nb::module_& m);  ///< Caches, StepArgs, Policy
void bind_status(nb::module_& m);

}  // namespace kda_py
