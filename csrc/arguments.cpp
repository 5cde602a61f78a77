// csrc/arguments.cpp — the argument classes of the extension (Caches, StepArgs, Policy),
// Status and the typed errors (core.h). Conversions only: the C++ validator checks values.
#include "core.h"

namespace kda_py {

using namespace nb::literals;

kda::Caches PyCaches::views(Keep& keep) const {
  kda::Caches c;
  c.conv_state = out_view(conv_state, "conv_state", keep);
  c.state = out_view(state, "state", keep);
  c.correction = out_view(correction, "correction", keep);
  c.key_gate = out_view(key_gate, "key_gate", keep);
  c.pending = out_view(pending, "pending", keep);
  return c;
}

kda::StepArgs PyStepArgs::views(Keep& keep) const {
  kda::StepArgs a;
  a.slots = in_view(slots, "slots", keep);
  a.q = q;
  a.mode = kda::parse_mode(mode);
  a.accepted = in_view(accepted, "accepted", keep);
  a.out_slots = in_view(out_slots, "out_slots", keep);
  a.record_rows = in_view(record_rows, "record_rows", keep);
  a.stream = reinterpret_cast<void*>(stream);
  return a;
}

kda::GateMode gate_mode_of(nb::handle g) {
  if (g.is_none()) return kda::GateMode::kAuto;
  if (nb::isinstance<nb::str>(g)) return kda::parse_gate_mode(nb::cast<std::string>(g));
  if (nb::isinstance<nb::int_>(g) && !nb::isinstance<nb::bool_>(g))
    return kda::parse_gate_mode(std::to_string(nb::cast<int64_t>(g)));
  throw kda::DTypeError("gate_mode", "'auto', 0, 1 or 2", py_type_name(g));
}

nb::object gate_mode_py(kda::GateMode g) {
  if (g == kda::GateMode::kAuto) return nb::str("auto");
  return nb::int_(int(g));
}

void bind_errors(nb::module_& m) {
  // Registered base first: nanobind tries the most recently registered translator first.
  nb::exception<kda::Error>(m, "Error", PyExc_ValueError);
  nb::exception<kda::DTypeError>(m, "DTypeError", PyExc_TypeError);
  nb::exception<kda::ShapeError>(m, "ShapeError", PyExc_ValueError);
  nb::exception<kda::LayoutError>(m, "LayoutError", PyExc_ValueError);
  nb::exception<kda::DeviceError>(m, "DeviceError", PyExc_ValueError);
  nb::exception<kda::ArgumentError>(m, "ArgumentError", PyExc_ValueError);
  nb::exception<kda::PlanError>(m, "PlanError", PyExc_ValueError);
}

void bind_arguments(nb::module_& m) {
  nb::class_<PyCaches>(m, "Caches", "kda::Caches: the tensors of a layer's caches (kda_decode.Caches converts to it).")
      .def(nb::init<nb::object, nb::object, nb::object, nb::object, nb::object>(), "conv_state"_a.none(),
           "state"_a.none(), "correction"_a.none() = nb::none(), "key_gate"_a.none() = nb::none(),
           "pending"_a.none() = nb::none())
      .def_rw("conv_state", &PyCaches::conv_state)
      .def_rw("state", &PyCaches::state)
      .def_rw("correction", &PyCaches::correction)
      .def_rw("key_gate", &PyCaches::key_gate)
      .def_rw("pending", &PyCaches::pending);

  nb::class_<PyStepArgs>(m, "StepArgs", "kda::StepArgs: the per-step arguments besides inputs, out and caches.")
      .def(
          "__init__",
          [](PyStepArgs* self, nb::object slots, int q, std::string mode, nb::object accepted, nb::object out_slots,
             nb::object record_rows, uintptr_t stream) {
            new (self)
                PyStepArgs{std::move(slots),       q,     std::move(mode), std::move(accepted), std::move(out_slots),
                           std::move(record_rows), stream};
          },
          "slots"_a.none(), "q"_a = 1, "mode"_a = "decode", "accepted"_a.none() = nb::none(),
          "out_slots"_a.none() = nb::none(), "record_rows"_a.none() = nb::none(), "stream"_a = 0)
      .def_rw("slots", &PyStepArgs::slots)
      .def_rw("q", &PyStepArgs::q)
      .def_rw("mode", &PyStepArgs::mode)
      .def_rw("accepted", &PyStepArgs::accepted)
      .def_rw("out_slots", &PyStepArgs::out_slots)
      .def_rw("record_rows", &PyStepArgs::record_rows)
      .def_rw("stream", &PyStepArgs::stream);

  nb::class_<kda::Policy>(m, "Policy",
                          "What the caller fixes per step key (SPEC §5).\n\n"
                          "Policy(pitch=0, gate_mode='auto', variant='auto', narrow='auto')\n\n"
                          "pitch: packed-row pitch in elements the step must be given (0 = take it from "
                          "the tensor; checked >= 0 by PreparedKda).\n"
                          "gate_mode: 'auto' (the planner picks 0 or 1), 0 per item, 1 shared, 2 "
                          "precomputed (gate_in holds F_B·f_a, D wide).\n"
                          "variant: 'auto' or a forced variant: 'cpu', 'split', 'wide', 'stream', 'ws'.\n"
                          "narrow: the CTA form of Wide's q = 1 decode / per_token steps with bf16 state in gate "
                          "modes 1 and 2: 'auto' (the planner's rule: beyond one wave of six CTAs per SM on a "
                          "device of high DRAM bandwidth per SM), 'on' (128-thread CTAs wherever the grid is beyond "
                          "one wave of six), 'off' (256-thread CTAs).\n\n"
                          "Raises ArgumentError (ValueError) for an unknown gate mode, variant or narrow name, "
                          "DTypeError (TypeError) for a gate mode of the wrong type.")
      .def(
          "__init__",
          [](kda::Policy* self, int64_t pitch, nb::handle gate_mode, const std::string& variant,
             const std::string& narrow) {
            new (self) kda::Policy{pitch, gate_mode_of(gate_mode), kda::parse_variant(variant),
                                   kda::parse_narrow_form(narrow)};
          },
          "pitch"_a = 0, "gate_mode"_a = nb::str("auto"), "variant"_a = "auto", "narrow"_a = "auto")
      .def_rw("pitch", &kda::Policy::pitch, "Packed-row pitch in elements (0 = any).")
      .def_prop_rw(
          "gate_mode", [](const kda::Policy& p) { return gate_mode_py(p.gate_mode); },
          [](kda::Policy& p, nb::handle g) { p.gate_mode = gate_mode_of(g); }, "'auto', 0, 1 or 2.")
      .def_prop_rw(
          "variant", [](const kda::Policy& p) { return std::string(kda::variant_name(p.variant)); },
          [](kda::Policy& p, const std::string& v) { p.variant = kda::parse_variant(v); },
          "'auto' or a forced variant name.")
      .def_prop_rw(
          "narrow", [](const kda::Policy& p) { return std::string(kda::narrow_form_name(p.narrow)); },
          [](kda::Policy& p, const std::string& n) { p.narrow = kda::parse_narrow_form(n); }, "'auto', 'on' or 'off'.")
      .def("__eq__",
           [](const kda::Policy& a, nb::handle bo) {
             kda::Policy b;
             if (!nb::try_cast(bo, b, false)) return false;
             return a.pitch == b.pitch && a.gate_mode == b.gate_mode && a.variant == b.variant && a.narrow == b.narrow;
           })
      .def("__hash__",
           [](const kda::Policy& p) {
             return std::hash<int64_t>()(p.pitch * 131 + int64_t(p.gate_mode) * 17 + int64_t(p.variant) +
                                         int64_t(p.narrow) * 1031);
           })
      .def("__repr__", [](const kda::Policy& p) {
        std::string g = p.gate_mode == kda::GateMode::kAuto ? "'auto'" : std::to_string(int(p.gate_mode));
        return "Policy(pitch=" + std::to_string(p.pitch) + ", gate_mode=" + g + ", variant='" +
               kda::variant_name(p.variant) + "', narrow='" + kda::narrow_form_name(p.narrow) + "')";
      });
}

void bind_status(nb::module_& m) {
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
}

}  // namespace kda_py
