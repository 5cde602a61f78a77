// csrc/bindings.cpp — the nanobind extension `kda_decode._core`: kda::PreparedKda, the SPEC §5
// helpers and the module (constants, MODES); argument classes, Status and errors in
// arguments.cpp, DLPack tensors in tensors.cpp. The Python package (python/kda_decode/) wraps
// this module with keyword arguments, stream resolution and lifetime management; use that,
// not this module, from Python code. Stubs: python/kda_decode/_core.pyi.
//
// The extension converts types only; every check of values, shapes and layouts is the C++
// validator's (src/validate), and its typed errors (kda/errors.h) arrive as the Python
// classes of the same names: DTypeError derives from TypeError, the others from ValueError.
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "backend.h"  // cuda_backend_built()
#include "core.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace kda_py;

namespace {

kda::LayerWeights weights_of(nb::handle conv_weight, nb::handle A_log, nb::handle dt_bias, nb::handle norm_weight,
                             nb::handle f_b_weight, nb::handle conv_bias, float eps, std::optional<float> lower_bound,
                             bool output_norm, Keep& keep) {
  kda::LayerWeights w;
  w.conv_weight = in_view(conv_weight, "conv_weight", keep);
  w.A_log = in_view(A_log, "A_log", keep);
  w.dt_bias = in_view(dt_bias, "dt_bias", keep);
  w.norm_weight = in_view(norm_weight, "norm_weight", keep);
  w.f_b_weight = in_view(f_b_weight, "f_b_weight", keep);
  w.conv_bias = in_view(conv_bias, "conv_bias", keep);
  w.eps = eps;
  w.lower_bound = lower_bound;
  w.output_norm = output_norm;
  return w;
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
  d["fallback"] = p.fallback ? nb::object(nb::str(kda::variant_name(p.fallback->variant))) : nb::none();
  d["description"] = p.describe();
  return d;
}

/// The bound object: owns the C++ PreparedKda (non-copyable, non-movable).
struct Core {
  std::unique_ptr<kda::PreparedKda> impl;
};

using PolicyList = std::vector<std::tuple<std::string, int, int, kda::Policy>>;

void bind_prepared(nb::module_& m) {
  nb::class_<Core>(m, "PreparedKda",
                   "Native kda::PreparedKda. Internal: use kda_decode.PreparedKda, which keeps the "
                   "borrowed weights alive and resolves streams.")
      .def(
          "__init__",
          [](Core* self, nb::handle conv_weight, nb::handle A_log, nb::handle dt_bias, nb::handle norm_weight,
             nb::handle f_b_weight, nb::handle conv_bias, float eps, std::optional<float> lower_bound, bool output_norm,
             const PolicyList& policies, bool conv_dim_first, int null_slot, const kda::Policy& default_policy) {
            Keep keep;
            const kda::LayerWeights w = weights_of(conv_weight, A_log, dt_bias, norm_weight, f_b_weight, conv_bias, eps,
                                                   lower_bound, output_norm, keep);
            std::unordered_map<kda::StepKey, kda::Policy, kda::StepKeyHash> pol;
            for (const auto& [mode, B, q, p] : policies) {
              const kda::StepKey k{kda::parse_mode(mode), B, q};
              if (!pol.emplace(k, p).second)
                throw kda::ArgumentError("policies", "each step key once", k.describe() + " twice");
            }
            std::unique_ptr<kda::PreparedKda> impl;
            {
              nb::gil_scoped_release nogil;
              impl = std::make_unique<kda::PreparedKda>(w, std::move(pol), conv_dim_first, null_slot, default_policy);
            }
            new (self) Core{std::move(impl)};
          },
          "conv_weight"_a.none(), "A_log"_a.none(), "dt_bias"_a.none(), "norm_weight"_a.none(), "f_b_weight"_a.none(),
          "conv_bias"_a.none(), "eps"_a, "lower_bound"_a.none(), "output_norm"_a, "policies"_a, "conv_dim_first"_a,
          "null_slot"_a, "default_policy"_a)
      .def(
          "prepare",
          [](Core& self, const PyCaches& caches) {
            Keep keep;
            const kda::Caches c = caches.views(keep);
            nb::gil_scoped_release nogil;
            self.impl->prepare(c);
          },
          "caches"_a)
      .def(
          "run",
          [](Core& self, nb::handle projected, nb::handle out, const PyCaches& caches, const PyStepArgs& args) {
            Keep keep;
            const kda::TensorView pj = in_view(projected, "projected", keep);
            const kda::TensorView o = out_view(out, "out", keep);
            const kda::Caches c = caches.views(keep);
            const kda::StepArgs a = args.views(keep);
            nb::gil_scoped_release nogil;
            self.impl->run(pj, o, c, a);
          },
          "projected"_a.none(), "out"_a.none(), "caches"_a, "args"_a)
      .def(
          "run_views",
          [](Core& self, nb::handle qkv, nb::handle out_gate, nb::handle gate_in, nb::handle beta, nb::handle out,
             const PyCaches& caches, const PyStepArgs& args) {
            Keep keep;
            const kda::InputViews in{in_view(qkv, "qkv", keep), in_view(out_gate, "out_gate", keep),
                                     in_view(gate_in, "gate_in", keep), in_view(beta, "beta", keep)};
            const kda::TensorView o = out_view(out, "out", keep);
            const kda::Caches c = caches.views(keep);
            const kda::StepArgs a = args.views(keep);
            nb::gil_scoped_release nogil;
            self.impl->run_views(in, o, c, a);
          },
          "qkv"_a.none(), "out_gate"_a.none(), "gate_in"_a.none(), "beta"_a.none(), "out"_a.none(), "caches"_a,
          "args"_a)
      .def(
          "commit",
          [](Core& self, const PyCaches& caches, nb::handle slots, nb::handle record_rows, nb::handle counts,
             uintptr_t stream) {
            Keep keep;
            const kda::Caches c = caches.views(keep);
            const kda::TensorView s = in_view(slots, "slots", keep);
            const kda::TensorView r = in_view(record_rows, "record_rows", keep);
            const kda::TensorView n = in_view(counts, "counts", keep);
            nb::gil_scoped_release nogil;
            self.impl->commit(c, s, r, n, reinterpret_cast<void*>(stream));
          },
          "caches"_a, "slots"_a.none(), "record_rows"_a.none(), "counts"_a.none(), "stream"_a)
      .def(
          "flush",
          [](Core& self, const PyCaches& caches, nb::handle slots, nb::handle record_rows, uintptr_t stream) {
            Keep keep;
            const kda::Caches c = caches.views(keep);
            const kda::TensorView s = in_view(slots, "slots", keep);
            const kda::TensorView r = in_view(record_rows, "record_rows", keep);
            nb::gil_scoped_release nogil;
            self.impl->flush(c, s, r, reinterpret_cast<void*>(stream));
          },
          "caches"_a, "slots"_a.none(), "record_rows"_a.none(), "stream"_a)
      .def(
          "process_weights_after_loading",
          [](Core& self, nb::handle conv_weight, nb::handle A_log, nb::handle dt_bias, nb::handle norm_weight,
             nb::handle f_b_weight, nb::handle conv_bias, float eps, std::optional<float> lower_bound,
             bool output_norm) {
            Keep keep;
            const kda::LayerWeights w = weights_of(conv_weight, A_log, dt_bias, norm_weight, f_b_weight, conv_bias, eps,
                                                   lower_bound, output_norm, keep);
            nb::gil_scoped_release nogil;
            self.impl->process_weights_after_loading(w);
          },
          "conv_weight"_a.none(), "A_log"_a.none(), "dt_bias"_a.none(), "norm_weight"_a.none(), "f_b_weight"_a.none(),
          "conv_bias"_a.none(), "eps"_a, "lower_bound"_a.none(), "output_norm"_a)
      .def(
          "status",
          [](Core& self, uintptr_t stream) {
            nb::gil_scoped_release nogil;
            return self.impl->status(reinterpret_cast<void*>(stream));
          },
          "stream"_a)
      .def(
          "plan",
          [](Core& self, const std::string& mode, int B, int q, const PyCaches& caches) {
            Keep keep;
            const kda::Caches c = caches.views(keep);
            return plan_dict(self.impl->plan_for({kda::parse_mode(mode), B, q}, c));
          },
          "mode"_a, "B"_a, "q"_a, "caches"_a)
      .def_prop_ro("heads", [](Core& self) { return self.impl->heads(); })
      .def_prop_ro("taps", [](Core& self) { return self.impl->taps(); })
      .def_prop_ro("device", [](Core& self) { return std::string(device_name(self.impl->device())); })
      .def_prop_ro("device_info", [](Core& self) {
        const kda::DeviceInfo& i = self.impl->device_info();
        nb::dict d;
        d["device"] = device_name(i.device);
        d["sms"] = i.sms;
        d["cc"] = nb::make_tuple(i.cc_major, i.cc_minor);
        d["smem_optin"] = i.smem_optin;
        d["clusters"] = i.clusters;
        return d;
      });
}

void bind_helpers(nb::module_& m) {
  m.def(
      "decode_conv_weight",
      [](nb::handle w) {
        Keep keep;
        const kda::TensorView v = in_view(w, "conv_weight", keep);
        auto* out = new std::vector<float>(kda::decode_conv_weight(v));
        const size_t D = size_t(v.shape[0] / 3), W = size_t(v.shape[2]);
        nb::capsule owner(out, [](void* p) noexcept { delete static_cast<std::vector<float>*>(p); });
        return nb::ndarray<nb::numpy, float>(out->data(), {3, W, D}, owner);
      },
      "conv_weight"_a.none(),
      "nn.Conv1d depthwise weight [3D, 1, W] (fp32 or bf16, host memory) -> numpy [3, W, D] fp32.");
  m.def(
      "stream_layout",
      [](nb::handle conv_state, nb::handle state, int q, bool conv_dim_first, int64_t input_row_stride_bytes,
         int64_t out_row_stride_bytes, int W) -> std::optional<std::tuple<bool, int64_t>> {
        Keep keep;
        kda::StreamOperands ops;
        ops.conv_state = in_view(conv_state, "conv_state", keep);
        ops.state = in_view(state, "state", keep);
        ops.conv_dim_first = conv_dim_first;
        ops.input_row_stride_bytes = input_row_stride_bytes;
        ops.out_row_stride_bytes = out_row_stride_bytes;
        ops.W = W;
        auto r = kda::stream_layout(ops, q);
        if (!r) return std::nullopt;
        return std::make_tuple(r->dim_first, r->window);
      },
      "conv_state"_a.none(), "state"_a.none(), "q"_a, "conv_dim_first"_a, "input_row_stride_bytes"_a,
      "out_row_stride_bytes"_a, "W"_a);
  m.def("stream_ctas", &kda::stream_ctas, "items"_a, "sms"_a,
        "Persistent CTAs for `items` items on `sms` SMs: per = ceil(items / 2·sms), ctas = ceil(items / per).");
  m.def(
      "deferred_supported",
      [](nb::handle state, std::optional<float> lower_bound) {
        Keep keep;
        return kda::deferred_supported(in_view(state, "state", keep), lower_bound);
      },
      "state"_a.none(), "lower_bound"_a.none());
  m.def("replays", &kda::replays, "H"_a, "B"_a, "q"_a,
        "Does a fused step of this shape run a fused variant (else flush + record verify)?");
  m.def("cuda_built", &kda::cuda_backend_built, "True when the extension was built with the CUDA backend.");
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() =
      "kda-decode native core (nanobind). Use the wrappers in the kda_decode package; this "
      "module's signatures are positional and internal.";
  m.attr("HEAD_DIM") = kda::kHeadDim;
  m.attr("RANK") = kda::kRank;
  m.attr("MAX_Q") = kda::kMaxQ;
  m.attr("SLOT_RANGE") = uint32_t(kda::kSlotRange);
  m.attr("ROW_RANGE") = uint32_t(kda::kRowRange);
  m.attr("ACCEPTED") = uint32_t(kda::kAccepted);
  m.attr("PENDING") = uint32_t(kda::kPending);
  m.attr("PAD_START") = uint32_t(kda::kPadStart);
  nb::list modes;
  for (const kda::ModeInfo& i : kda::kModes) modes.append(i.name);
  m.attr("MODES") = nb::tuple(modes);
  bind_errors(m);
  bind_arguments(m);
  bind_status(m);
  bind_prepared(m);
  bind_helpers(m);
}
