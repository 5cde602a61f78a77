// kda/operands.h — what a step is given (SPEC §2): the layer's weights, the caches, the four
// per-row input views and the per-step arguments, all as borrowed kda::TensorView.
#pragma once

#include <optional>

#include "kda/types.h"

namespace kda {

/// The layer's weights (SPEC §2). Views are borrowed except conv_weight and norm_weight,
/// from which PreparedKda derives its own fp32 copies.
///
/// `output_norm = false` builds the layer without the output norm (SPEC §9, vLLM's
/// `fuse_output_norm=False`): a step writes out = bf16(o), with no RMSNorm and no output
/// gate. norm_weight is then optional (checked when given, never used), the out_gate view
/// may be absent from run_views (checked when given, never read), and the packed row of
/// run() keeps its layout (its out_gate columns are ignored). eps is still checked.
struct LayerWeights {
  TensorView conv_weight;            ///< [3D, 1, W] fp32 or bf16 (nn.Conv1d depthwise weight)
  TensorView conv_bias;              ///< [3D] fp32, optional (data == nullptr: none)
  TensorView f_b_weight;             ///< [D, R] bf16, nn.Linear(R, D).weight; optional in gate mode 2
  TensorView A_log;                  ///< [H] fp32
  TensorView dt_bias;                ///< [D] fp32
  TensorView norm_weight;            ///< [K] any float dtype (kept as fp32); optional without the output norm
  float eps = 1e-5f;                 ///< RMSNorm epsilon
  std::optional<float> lower_bound;  ///< none: softplus gate; else in [-5, 0)
  bool output_norm = true;           ///< false: out = bf16(o), no RMSNorm, no output gate (SPEC §9)
};

/// The caches a step reads and writes (SPEC §2). records/pending are optional.
struct Caches {
  TensorView conv_state;  ///< DS [slots, 3D, window] or SD [slots, window, 3D]; bf16 / fp32
  TensorView state;       ///< [slots, H, V, K] fp32 (or bf16), inner dense
  TensorView correction;  ///< records u: [rows_r, H, Qr, V] fp32
  TensorView key_gate;    ///< records (k, g): [rows_r, H, Qr, 2K] fp32
  TensorView pending;     ///< [rows_r] int32
};

/// Per-step arguments besides the inputs, out and caches.
struct StepArgs {
  TensorView slots;  ///< int32: decode [>=B]; per_token [>=B, >=q]; record/fused [>=B] or [>=B, 1]
  int q = 1;
  StepMode mode = StepMode::kDecode;
  TensorView accepted;     ///< [>=B] int32, optional (default 1)
  TensorView out_slots;    ///< [>=B] int32, decode only, optional (default slots)
  TensorView record_rows;  ///< [>=B] int32, record/fused only, optional (default checkpoint)
  void* stream = nullptr;  ///< cudaStream_t (CUDA backend); ignored on the CPU
};

/// The four per-row input views of SPEC §2 (run_views); `run` slices them from the packed row.
struct InputViews {
  TensorView qkv;       ///< [rows, 3D] bf16
  TensorView out_gate;  ///< [rows, D] bf16; may be undefined for a layer without the output norm
  TensorView gate_in;   ///< [rows, R] (modes 0, 1) or [rows, D] (mode 2) bf16
  TensorView beta;      ///< [rows, H] bf16
};

}  // namespace kda
