// csrc/bindings.cpp — the nanobind extension `kda_decode._core`: kda::PreparedKda, the SPEC §5
// helpers, Policy and Status. The Python package (python/kda_decode/__init__.py) wraps this
// module with keyword arguments, stream resolution and Python-side lifetime management; use
// that, not this module, from Python code.
//
// Tensors come in through DLPack (nanobind `nb::ndarray`): numpy arrays on the CPU, torch
// tensors on the CPU or CUDA, or anything else exporting `__dlpack__` / the buffer protocol.
// They become kda::TensorView (data pointer, dtype, device, shape, strides in elements) with
// no copy. dtype mapping:
//   DLPack bfloat16            -> bf16
//   uint16                     -> bf16 (numpy has no bfloat16: a uint16 array is taken as
//                                 bf16 bit patterns)
//   float16 / float32 / float64 -> f16 / f32 / f64
//   int32 / int64              -> i32 / i64
// Anything else (bool, int8, complex, ...) raises TypeError naming the operand. Devices:
// kDLCPU (and kDLCUDAHost, pinned host memory) -> CPU, kDLCUDA -> CUDA with the device id;
// others raise ValueError. Operands the step writes must be writable arrays.
//
// Errors: the C++ layer throws std::invalid_argument for host-side operand errors; they
// arrive in Python as TypeError when the dtype is wrong and ValueError otherwise, with the
// message naming the operand, the expected and the actual value.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "backend.h"  // cuda_backend_built()
#include "kda/plan.h"
#include "kda/prepared.h"
#include "kda/types.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// DLPack device types (dlpack.h): kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3.
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3;

using RoArray = nb::ndarray<nb::ro>;
using RwArray = nb::ndarray<>;

/// Keeps the imported DLPack handles alive for the duration of one call.
struct Keep {
  std::vector<RoArray> ro;
  std::vector<RwArray> rw;
};

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::type_name(h.type())); }

std::string dlpack_dtype_name(const nb::dlpack::dtype& d) {
  using C = nb::dlpack::dtype_code;
  std::string base;
  switch (C(d.code)) {
    case C::Int: base = "int"; break;
    case C::UInt: base = "uint"; break;
    case C::Float: base = "float"; break;
    case C::Bfloat: base = "bfloat"; break;
    case C::Complex: base = "complex"; break;
    case C::Bool: base = "bool"; break;
    default: base = "code" + std::to_string(int(d.code)) + "_"; break;
  }
  if (C(d.code) == C::Bool) return "bool";
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
  throw nb::type_error((std::string(name) + ": unsupported dtype " + dlpack_dtype_name(d) +
                        " (supported: bfloat16 or uint16 bf16 bit patterns, float16, float32, "
                        "float64, int32, int64)")
                           .c_str());
}

template <class Arr>
kda::TensorView view_of(const Arr& a, const char* name) {
  kda::TensorView v;
  const size_t nd = a.ndim();
  if (nd > size_t(kda::kMaxTensorRank))
    throw std::invalid_argument(std::string(name) + ": expected rank <= " + std::to_string(kda::kMaxTensorRank) +
                                ", got rank " + std::to_string(nd));
  v.dtype = map_dtype(a.dtype(), name);
  const int dt = a.device_type();
  if (dt == kDLCPU || dt == kDLCUDAHost) {
    v.device = kda::Device::kCPU;
    v.device_id = 0;
  } else if (dt == kDLCUDA) {
    v.device = kda::Device::kCUDA;
    v.device_id = a.device_id();
  } else {
    throw std::invalid_argument(std::string(name) + ": expected a CPU or CUDA tensor, got DLPack device type " +
                                std::to_string(dt));
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
  throw nb::type_error((std::string(name) + ": expected a tensor exporting DLPack (numpy array, torch tensor, ...)" +
                        (writable ? " that is writable" : "") + ", got " + py_type_name(obj) +
                        " (torch tensors that require grad must be detached)")
                           .c_str());
}

/// Converts a Python tensor to a view. None -> an undefined view when `optional`, else an error.
kda::TensorView to_view(nb::handle obj, const char* name, bool writable, bool optional, Keep& keep) {
  if (obj.is_none()) {
    if (optional) return kda::TensorView{};
    throw nb::type_error((std::string(name) + ": expected a tensor, got None").c_str());
  }
  if (writable) {
    RwArray a;
    if (nb::try_cast(obj, a, false)) {
      keep.rw.push_back(a);
      return view_of(a, name);
    }
    RoArray r;
    if (nb::try_cast(obj, r, false))
      throw std::invalid_argument(std::string(name) + ": expected a writable tensor (the step writes it), got a read-only one");
    not_importable(obj, name, true);
  }
  RoArray a;
  if (!nb::try_cast(obj, a, false)) not_importable(obj, name, false);
  keep.ro.push_back(a);
  return view_of(a, name);
}

kda::TensorView in_view(nb::handle obj, const char* name, Keep& keep, bool optional = false) {
  return to_view(obj, name, false, optional, keep);
}
kda::TensorView out_view(nb::handle obj, const char* name, Keep& keep, bool optional = false) {
  return to_view(obj, name, true, optional, keep);
}

kda::Caches caches_of(nb::handle conv_state, nb::handle state, nb::handle correction, nb::handle key_gate,
                      nb::handle pending, Keep& keep) {
  kda::Caches c;
  c.conv_state = out_view(conv_state, "conv_state", keep);
  c.state = out_view(state, "state", keep);
  c.correction = out_view(correction, "correction", keep, true);
  c.key_gate = out_view(key_gate, "key_gate", keep, true);
  c.pending = out_view(pending, "pending", keep, true);
  return c;
}

kda::LayerWeights weights_of(nb::handle conv_weight, nb::handle A_log, nb::handle dt_bias, nb::handle norm_weight,
                             nb::handle f_b_weight, nb::handle conv_bias, float eps,
                             std::optional<float> lower_bound, Keep& keep) {
  kda::LayerWeights w;
  w.conv_weight = in_view(conv_weight, "conv_weight", keep);
  w.A_log = in_view(A_log, "A_log", keep);
  w.dt_bias = in_view(dt_bias, "dt_bias", keep);
  w.norm_weight = in_view(norm_weight, "norm_weight", keep);
  w.f_b_weight = in_view(f_b_weight, "f_b_weight", keep, true);
  w.conv_bias = in_view(conv_bias, "conv_bias", keep, true);
  w.eps = eps;
  w.lower_bound = lower_bound;
  return w;
}

kda::GateMode gate_mode_of(nb::handle g) {
  if (nb::isinstance<nb::str>(g)) {
    const std::string s = nb::cast<std::string>(g);
    if (s == "auto") return kda::GateMode::kAuto;
    if (s == "0" || s == "per_item") return kda::GateMode::kPerItem;
    if (s == "1" || s == "shared") return kda::GateMode::kShared;
    if (s == "2" || s == "precomputed") return kda::GateMode::kPrecomputed;
    throw std::invalid_argument("gate_mode: expected 'auto', 0, 1 or 2, got '" + s + "'");
  }
  if (nb::isinstance<nb::int_>(g) && !nb::isinstance<nb::bool_>(g)) {
    const int v = nb::cast<int>(g);
    if (v == -1) return kda::GateMode::kAuto;
    if (v >= 0 && v <= 2) return kda::GateMode(v);
    throw std::invalid_argument("gate_mode: expected 'auto', 0, 1 or 2, got " + std::to_string(v));
  }
  if (g.is_none()) return kda::GateMode::kAuto;
  throw nb::type_error(("gate_mode: expected 'auto', 0, 1 or 2, got " + py_type_name(g)).c_str());
}

nb::object gate_mode_py(kda::GateMode g) {
  if (g == kda::GateMode::kAuto) return nb::str("auto");
  return nb::int_(int(g));
}

kda::StepArgs args_of(nb::handle slots, int q, const std::string& mode, nb::handle accepted, nb::handle out_slots,
                      nb::handle record_rows, uintptr_t stream, Keep& keep) {
  kda::StepArgs a;
  a.slots = in_view(slots, "slots", keep);
  a.q = q;
  a.mode = kda::parse_mode(mode);
  a.accepted = in_view(accepted, "accepted", keep, true);
  a.out_slots = in_view(out_slots, "out_slots", keep, true);
  a.record_rows = in_view(record_rows, "record_rows", keep, true);
  a.stream = reinterpret_cast<void*>(stream);
  return a;
}

const char* device_name(kda::Device d) { return d == kda::Device::kCUDA ? "cuda" : "cpu"; }

nb::dict plan_dict(const kda::Plan& p) {
  nb::dict d;
  d["mode"] = kda::mode_name(p.key.mode);
  d["B"] = p.key.B;
  d["q"] = p.key.q;
  d["variant"] = kda::variant_name(p.variant);
  d["gate_mode"] = gate_mode_py(p.gate_mode);
  d["split"] = p.split;
  d["threads"] = p.threads;
  d["ctas"] = p.ctas;
  d["smem"] = p.smem;
  d["pitch"] = p.pitch;
  d["fused_one_launch"] = p.fused_one_launch;
  d["description"] = p.describe();
  return d;
}

/// The bound object: owns the C++ PreparedKda (non-copyable, non-movable).
struct Core {
  std::unique_ptr<kda::PreparedKda> impl;
  kda::PreparedKda& get() {
    if (!impl) throw std::runtime_error("PreparedKda: not initialised");
    return *impl;
  }
};

using PolicyList = std::vector<std::tuple<std::string, int, int, kda::Policy>>;

}  // namespace

NB_MODULE(_core, m) {
  m.doc() =
      "kda-decode native core (nanobind). Use the wrappers in the kda_decode package; this "
      "module's signatures are positional and internal.";

  // std::invalid_argument -> TypeError for dtype mismatches, ValueError otherwise.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const std::invalid_argument& e) {
      const char* msg = e.what();
      PyErr_SetString(std::strstr(msg, ": expected dtype") ? PyExc_TypeError : PyExc_ValueError, msg);
    }
  });

  m.attr("HEAD_DIM") = kda::kHeadDim;
  m.attr("RANK") = kda::kRank;
  m.attr("MAX_Q") = kda::kMaxQ;
  m.attr("SLOT_RANGE") = uint32_t(kda::kSlotRange);
  m.attr("ROW_RANGE") = uint32_t(kda::kRowRange);
  m.attr("ACCEPTED") = uint32_t(kda::kAccepted);
  m.attr("PENDING") = uint32_t(kda::kPending);
  m.attr("PAD_START") = uint32_t(kda::kPadStart);

  // ---- Policy --------------------------------------------------------------------------
  nb::class_<kda::Policy>(m, "Policy",
                          "What the caller fixes per step key (SPEC §5).\n\n"
                          "Policy(pitch=0, gate_mode='auto', variant='auto')\n\n"
                          "pitch: packed-row pitch in elements the step must be given (0 = take it from "
                          "the tensor).\n"
                          "gate_mode: 'auto' (the planner picks 0 or 1), 0 per item, 1 shared, 2 "
                          "precomputed (gate_in holds F_B·f_a, D wide).\n"
                          "variant: 'auto' or a forced variant: 'cpu', 'split', 'wide', 'stream', 'ws', "
                          "'fused', 'fused_ws'.\n\n"
                          "Raises ValueError for an unknown gate mode or variant name, TypeError for a "
                          "gate mode of the wrong type.")
      .def(
          "__init__",
          [](kda::Policy* self, int64_t pitch, nb::handle gate_mode, const std::string& variant) {
            if (pitch < 0) throw std::invalid_argument("pitch: expected >= 0, got " + std::to_string(pitch));
            kda::Policy p;
            p.pitch = pitch;
            p.gate_mode = gate_mode_of(gate_mode);
            p.variant = kda::parse_variant(variant);
            new (self) kda::Policy(p);
          },
          "pitch"_a = 0, "gate_mode"_a = nb::str("auto"), "variant"_a = "auto")
      .def_rw("pitch", &kda::Policy::pitch, "Packed-row pitch in elements (0 = any).")
      .def_prop_rw(
          "gate_mode", [](const kda::Policy& p) { return gate_mode_py(p.gate_mode); },
          [](kda::Policy& p, nb::handle g) { p.gate_mode = gate_mode_of(g); },
          "'auto', 0, 1 or 2.")
      .def_prop_rw(
          "variant", [](const kda::Policy& p) { return std::string(kda::variant_name(p.variant)); },
          [](kda::Policy& p, const std::string& v) { p.variant = kda::parse_variant(v); },
          "'auto' or a forced variant name.")
      .def("__eq__",
           [](const kda::Policy& a, nb::handle bo) {
             kda::Policy b;
             if (!nb::try_cast(bo, b, false)) return false;
             return a.pitch == b.pitch && a.gate_mode == b.gate_mode && a.variant == b.variant;
           })
      .def("__hash__",
           [](const kda::Policy& p) {
             return std::hash<int64_t>()(p.pitch * 131 + int64_t(p.gate_mode) * 17 + int64_t(p.variant));
           })
      .def("__repr__", [](const kda::Policy& p) {
        std::string g = p.gate_mode == kda::GateMode::kAuto ? "'auto'" : std::to_string(int(p.gate_mode));
        return "Policy(pitch=" + std::to_string(p.pitch) + ", gate_mode=" + g + ", variant='" +
               kda::variant_name(p.variant) + "')";
      });

  // ---- Status --------------------------------------------------------------------------
  nb::class_<kda::Status>(m, "Status",
                          "Caller errors found in the data since the last status() call (SPEC §4).\n\n"
                          "flags: OR of SLOT_RANGE=1, ROW_RANGE=2, ACCEPTED=4, PENDING=8, PAD_START=16.\n"
                          "first_request: the lowest offending request index, -1 when flags == 0.\n"
                          "ok: flags == 0.")
      .def(nb::init<>())
      .def_ro("flags", &kda::Status::flags, "OR of the error flags (int).")
      .def_ro("first_request", &kda::Status::first_request, "Lowest offending request index, -1 if none.")
      .def_prop_ro("ok", &kda::Status::ok, "True when no flag is set.")
      .def("describe", &kda::Status::describe, "'ok' or e.g. 'SLOT_RANGE|ACCEPTED (first request 3)'.")
      .def("__repr__",
           [](const kda::Status& s) {
             return "Status(flags=" + std::to_string(s.flags) + ", first_request=" + std::to_string(s.first_request) +
                    ": " + s.describe() + ")";
           })
      .def("__eq__",
           [](const kda::Status& a, nb::handle bo) {
             kda::Status b;
             if (!nb::try_cast(bo, b, false)) return false;
             return a.flags == b.flags && a.first_request == b.first_request;
           })
      .def_prop_ro_static("SLOT_RANGE", [](nb::handle) { return uint32_t(kda::kSlotRange); })
      .def_prop_ro_static("ROW_RANGE", [](nb::handle) { return uint32_t(kda::kRowRange); })
      .def_prop_ro_static("ACCEPTED", [](nb::handle) { return uint32_t(kda::kAccepted); })
      .def_prop_ro_static("PENDING", [](nb::handle) { return uint32_t(kda::kPending); })
      .def_prop_ro_static("PAD_START", [](nb::handle) { return uint32_t(kda::kPadStart); });

  // ---- PreparedKda ---------------------------------------------------------------------
  nb::class_<Core>(m, "PreparedKda",
                   "Native kda::PreparedKda. Internal: use kda_decode.PreparedKda, which keeps the "
                   "borrowed weights alive and resolves streams.")
      .def(
          "__init__",
          [](Core* self, nb::handle conv_weight, nb::handle A_log, nb::handle dt_bias, nb::handle norm_weight,
             nb::handle f_b_weight, nb::handle conv_bias, float eps, std::optional<float> lower_bound,
             const PolicyList& policies, bool conv_dim_first, int null_slot, const kda::Policy& default_policy) {
            Keep keep;
            kda::LayerWeights w =
                weights_of(conv_weight, A_log, dt_bias, norm_weight, f_b_weight, conv_bias, eps, lower_bound, keep);
            std::unordered_map<kda::StepKey, kda::Policy, kda::StepKeyHash> pol;
            for (const auto& [mode, B, q, p] : policies) {
              kda::StepKey k{kda::parse_mode(mode), B, q};
              if (!pol.emplace(k, p).second)
                throw std::invalid_argument("policies: step key " + k.describe() + " given twice");
            }
            std::unique_ptr<kda::PreparedKda> impl;
            {
              nb::gil_scoped_release nogil;
              impl = std::make_unique<kda::PreparedKda>(w, std::move(pol), conv_dim_first, null_slot,
                                                        default_policy);
            }
            new (self) Core{std::move(impl)};
          },
          "conv_weight"_a, "A_log"_a, "dt_bias"_a, "norm_weight"_a, "f_b_weight"_a.none(), "conv_bias"_a.none(),
          "eps"_a, "lower_bound"_a.none(), "policies"_a, "conv_dim_first"_a, "null_slot"_a, "default_policy"_a)
      .def(
          "prepare",
          [](Core& self, nb::handle cs, nb::handle st, nb::handle cr, nb::handle kg, nb::handle pd) {
            Keep keep;
            kda::Caches c = caches_of(cs, st, cr, kg, pd, keep);
            nb::gil_scoped_release nogil;
            self.get().prepare(c);
          },
          "conv_state"_a.none(), "state"_a.none(), "correction"_a.none(), "key_gate"_a.none(), "pending"_a.none())
      .def(
          "run",
          [](Core& self, nb::handle projected, nb::handle out, nb::handle cs, nb::handle st, nb::handle cr,
             nb::handle kg, nb::handle pd, nb::handle slots, int q, const std::string& mode, nb::handle accepted,
             nb::handle out_slots, nb::handle record_rows, uintptr_t stream) {
            Keep keep;
            kda::TensorView pj = in_view(projected, "projected", keep);
            kda::TensorView o = out_view(out, "out", keep);
            kda::Caches c = caches_of(cs, st, cr, kg, pd, keep);
            kda::StepArgs a = args_of(slots, q, mode, accepted, out_slots, record_rows, stream, keep);
            nb::gil_scoped_release nogil;
            self.get().run(pj, o, c, a);
          },
          "projected"_a.none(), "out"_a.none(), "conv_state"_a.none(), "state"_a.none(), "correction"_a.none(),
          "key_gate"_a.none(), "pending"_a.none(), "slots"_a.none(), "q"_a, "mode"_a, "accepted"_a.none(),
          "out_slots"_a.none(), "record_rows"_a.none(), "stream"_a)
      .def(
          "run_views",
          [](Core& self, nb::handle qkv, nb::handle out_gate, nb::handle gate_in, nb::handle beta, nb::handle out,
             nb::handle cs, nb::handle st, nb::handle cr, nb::handle kg, nb::handle pd, nb::handle slots, int q,
             const std::string& mode, nb::handle accepted, nb::handle out_slots, nb::handle record_rows,
             uintptr_t stream) {
            Keep keep;
            kda::InputViews in;
            in.qkv = in_view(qkv, "qkv", keep);
            in.out_gate = in_view(out_gate, "out_gate", keep);
            in.gate_in = in_view(gate_in, "gate_in", keep);
            in.beta = in_view(beta, "beta", keep);
            kda::TensorView o = out_view(out, "out", keep);
            kda::Caches c = caches_of(cs, st, cr, kg, pd, keep);
            kda::StepArgs a = args_of(slots, q, mode, accepted, out_slots, record_rows, stream, keep);
            nb::gil_scoped_release nogil;
            self.get().run_views(in, o, c, a);
          },
          "qkv"_a.none(), "out_gate"_a.none(), "gate_in"_a.none(), "beta"_a.none(), "out"_a.none(),
          "conv_state"_a.none(), "state"_a.none(), "correction"_a.none(), "key_gate"_a.none(), "pending"_a.none(),
          "slots"_a.none(), "q"_a, "mode"_a, "accepted"_a.none(), "out_slots"_a.none(), "record_rows"_a.none(),
          "stream"_a)
      .def(
          "commit",
          [](Core& self, nb::handle cs, nb::handle st, nb::handle cr, nb::handle kg, nb::handle pd, nb::handle slots,
             nb::handle record_rows, nb::handle counts, uintptr_t stream) {
            Keep keep;
            kda::Caches c = caches_of(cs, st, cr, kg, pd, keep);
            kda::TensorView s = in_view(slots, "slots", keep);
            kda::TensorView r = in_view(record_rows, "record_rows", keep, true);
            kda::TensorView n = in_view(counts, "counts", keep);
            nb::gil_scoped_release nogil;
            self.get().commit(c, s, r, n, reinterpret_cast<void*>(stream));
          },
          "conv_state"_a.none(), "state"_a.none(), "correction"_a.none(), "key_gate"_a.none(), "pending"_a.none(),
          "slots"_a.none(), "record_rows"_a.none(), "counts"_a.none(), "stream"_a)
      .def(
          "flush",
          [](Core& self, nb::handle cs, nb::handle st, nb::handle cr, nb::handle kg, nb::handle pd, nb::handle slots,
             nb::handle record_rows, uintptr_t stream) {
            Keep keep;
            kda::Caches c = caches_of(cs, st, cr, kg, pd, keep);
            kda::TensorView s = in_view(slots, "slots", keep);
            kda::TensorView r = in_view(record_rows, "record_rows", keep, true);
            nb::gil_scoped_release nogil;
            self.get().flush(c, s, r, reinterpret_cast<void*>(stream));
          },
          "conv_state"_a.none(), "state"_a.none(), "correction"_a.none(), "key_gate"_a.none(), "pending"_a.none(),
          "slots"_a.none(), "record_rows"_a.none(), "stream"_a)
      .def(
          "process_weights_after_loading",
          [](Core& self, nb::handle conv_weight, nb::handle A_log, nb::handle dt_bias, nb::handle norm_weight,
             nb::handle f_b_weight, nb::handle conv_bias, float eps, std::optional<float> lower_bound) {
            Keep keep;
            kda::LayerWeights w =
                weights_of(conv_weight, A_log, dt_bias, norm_weight, f_b_weight, conv_bias, eps, lower_bound, keep);
            nb::gil_scoped_release nogil;
            self.get().process_weights_after_loading(w);
          },
          "conv_weight"_a, "A_log"_a, "dt_bias"_a, "norm_weight"_a, "f_b_weight"_a.none(), "conv_bias"_a.none(),
          "eps"_a, "lower_bound"_a.none())
      .def(
          "status",
          [](Core& self, uintptr_t stream) {
            nb::gil_scoped_release nogil;
            return self.get().status(reinterpret_cast<void*>(stream));
          },
          "stream"_a)
      .def(
          "plan",
          [](Core& self, const std::string& mode, int B, int q, nb::handle cs, nb::handle st, nb::handle cr,
             nb::handle kg, nb::handle pd) {
            Keep keep;
            kda::Caches c = caches_of(cs, st, cr, kg, pd, keep);
            const kda::StepKey key{kda::parse_mode(mode), B, q};
            return plan_dict(self.get().plan_for(key, c));
          },
          "mode"_a, "B"_a, "q"_a, "conv_state"_a.none(), "state"_a.none(), "correction"_a.none(),
          "key_gate"_a.none(), "pending"_a.none())
      .def_prop_ro("heads", [](Core& self) { return self.get().heads(); })
      .def_prop_ro("taps", [](Core& self) { return self.get().taps(); })
      .def_prop_ro("device", [](Core& self) { return std::string(device_name(self.get().device())); })
      .def_prop_ro("device_info", [](Core& self) {
        const kda::DeviceInfo& i = self.get().device_info();
        nb::dict d;
        d["device"] = device_name(i.device);
        d["sms"] = i.sms;
        d["cc"] = nb::make_tuple(i.cc_major, i.cc_minor);
        d["smem_optin"] = i.smem_optin;
        d["clusters"] = i.clusters;
        return d;
      });

  // ---- helpers (SPEC §5) ---------------------------------------------------------------
  m.def(
      "decode_conv_weight",
      [](nb::handle w) {
        Keep keep;
        kda::TensorView v = in_view(w, "conv_weight", keep);
        auto* out = new std::vector<float>(kda::decode_conv_weight(v));
        const size_t D = size_t(v.shape[0] / 3), W = size_t(v.shape[2]);
        nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
        return nb::ndarray<nb::numpy, float>(out->data(), {3, W, D}, owner);
      },
      "conv_weight"_a,
      "nn.Conv1d depthwise weight [3D, 1, W] (fp32 or bf16, host memory) -> numpy [3, W, D] fp32.");
  m.def(
      "stream_layout",
      [](nb::handle conv_state, nb::handle state, int q, bool conv_dim_first, int64_t input_row_stride_bytes,
         int64_t out_row_stride_bytes, int W) -> std::optional<std::tuple<bool, int64_t>> {
        Keep keep;
        kda::StreamOperands ops;
        ops.conv_state = in_view(conv_state, "conv_state", keep);
        ops.state = in_view(state, "state", keep, true);
        ops.conv_dim_first = conv_dim_first;
        ops.input_row_stride_bytes = input_row_stride_bytes;
        ops.out_row_stride_bytes = out_row_stride_bytes;
        ops.W = W;
        auto r = kda::stream_layout(ops, q);
        if (!r) return std::nullopt;
        return std::make_tuple(r->dim_first, r->window);
      },
      "conv_state"_a, "state"_a.none(), "q"_a, "conv_dim_first"_a, "input_row_stride_bytes"_a,
      "out_row_stride_bytes"_a, "W"_a);
  m.def("stream_ctas", &kda::stream_ctas, "items"_a, "sms"_a,
        "Persistent CTAs for `items` items on `sms` SMs: per = ceil(items / 2·sms), ctas = ceil(items / per).");
  m.def(
      "deferred_supported",
      [](nb::handle state, std::optional<float> lower_bound) {
        Keep keep;
        return kda::deferred_supported(in_view(state, "state", keep), lower_bound);
      },
      "state"_a, "lower_bound"_a.none());
  m.def("replays", &kda::replays, "H"_a, "B"_a, "q"_a,
        "Does a fused step of this shape run a fused variant (else flush + record verify)?");
  m.def("cuda_built", &kda::cuda_backend_built, "True when the extension was built with the CUDA backend.");
}
