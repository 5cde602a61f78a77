// kda/params.h — the POD parameter blocks that every backend consumes (FlashInfer style:
// raw pointers, int64 strides in elements, no framework types). The host layer
// (PreparedKda) fills them from validated TensorViews; the CPU backend and every CUDA
// kernel read them as they are.
#pragma once

#include <cstdint>

namespace kda {

/// One step (decode / per_token / record / fused) of B requests × q tokens (SPEC §3, §4).
/// All pointers are on the backend's device. Input/out tensors hold bf16 bit patterns.
struct StepParams {
  // ---- shape of the step -------------------------------------------------------------
  int32_t mode = 0;       ///< StepMode
  int32_t B = 0;          ///< requests
  int32_t q = 1;          ///< tokens per request, rows = B·q
  int32_t H = 0;          ///< heads; D = 128·H
  int32_t W = 4;          ///< conv taps
  int32_t gate_mode = 0;  ///< resolved: 0 per item, 1 shared, 2 precomputed
  int32_t null_slot = 0;  ///< pad id besides negatives; -1 disables
  int32_t has_lower_bound = 0;
  float lower_bound = 0.f;
  float eps = 1e-5f;        ///< RMSNorm epsilon
  int32_t output_norm = 1;  ///< 0: out = bf16(o), no RMSNorm, no output gate (SPEC §9); out_gate unread

  // ---- per-row inputs: bf16, unit inner stride, row stride in elements ----------------
  const uint16_t* qkv = nullptr;  ///< [rows, 3D]
  int64_t qkv_row = 0;
  const uint16_t* out_gate = nullptr;  ///< [rows, D]
  int64_t out_gate_row = 0;
  const uint16_t* gate_in = nullptr;  ///< [rows, R] (modes 0, 1) or [rows, D] (mode 2)
  int64_t gate_in_row = 0;
  /// Gate mode 1 on CUDA: the raw gate F_B·f_a of every row [rows padded, D] fp32, written by
  /// the gate kernel (gate_kernel.cuh) into the PreparedKda's workspace, read by the step kernel.
  float* gate_ws = nullptr;
  int64_t gate_ws_row = 0;
  int32_t gate_tile_rows = 0;      ///< step rows per gate-kernel CTA (Plan::gate_tile_rows)
  int32_t gate_ws_keep = 0;        ///< 1: the gate kernel stores the logits L2 evict-last (Plan::gate_ws_keep)
  const uint16_t* beta = nullptr;  ///< [rows, H]
  int64_t beta_row = 0;
  uint16_t* out = nullptr;  ///< [rows, D]
  int64_t out_row = 0;

  // ---- conv window cache, logical [slots, 3D, window] ----------------------------------
  void* conv = nullptr;
  int32_t conv_f32 = 0;  ///< 0: bf16, 1: fp32
  int32_t window = 0;
  int64_t conv_slots = 0;  ///< pool size
  int64_t conv_slot_stride = 0, conv_chan_stride = 0, conv_col_stride = 0;

  // ---- recurrent state [slots, H, V, K], inner dense ----------------------------------
  void* state = nullptr;
  int32_t state_bf16 = 0;  ///< 0: fp32, 1: bf16 (SPEC §9)
  int64_t state_slots = 0;
  int64_t state_slot_stride = 0;  ///< elements; inner [H, V, K] dense

  // ---- slot tensors (int32) ------------------------------------------------------------
  const int32_t* slots = nullptr;
  int64_t slots_stride0 = 0, slots_stride1 = 0;
  int32_t slots_cols = 1;              ///< row width (per_token: >= q)
  const int32_t* out_slots = nullptr;  ///< decode only, optional
  int64_t out_slots_stride = 0;
  const int32_t* accepted = nullptr;  ///< optional, default 1
  int64_t accepted_stride = 0;
  const int32_t* record_rows = nullptr;  ///< optional, default the checkpoint slot
  int64_t record_rows_stride = 0;

  // ---- records (record / fused) --------------------------------------------------------
  float* correction = nullptr;  ///< [rows_r, H, Qr, V]
  int64_t correction_row = 0;
  float* key_gate = nullptr;  ///< [rows_r, H, Qr, 2K]: k_t then g_t
  int64_t key_gate_row = 0;
  int64_t record_rows_n = 0;  ///< rows_r
  int32_t Qr = 0;
  int32_t* pending = nullptr;  ///< [rows_r]
  int64_t pending_stride = 0;

  // ---- weights ---------------------------------------------------------------------------
  const float* conv_w = nullptr;  ///< derived [3, W, D] fp32 (decode_conv_weight)
  const float* conv_b = nullptr;  ///< [3D] or nullptr
  const uint16_t* f_b = nullptr;  ///< [D, R] bf16 (nullptr in gate mode 2)
  int64_t f_b_row = 0;
  const float* A_log = nullptr;    ///< [H]
  const float* dt_bias = nullptr;  ///< [D]
  const float* norm_w = nullptr;   ///< [K] fp32 copy

  // ---- caller-error report (SPEC §4) ---------------------------------------------------
  uint32_t* error_flags = nullptr;  ///< OR of ErrorFlag
  int32_t* error_index = nullptr;   ///< min offending request index (INT32_MAX = none)

  // ---- fused mode on CUDA: pending[row] is shared by the H items of a request, so the last
  // item to arrive (atomic count per records row, self-resetting) zeroes it.
  int32_t* arrivals = nullptr;  ///< [rows_r] int32, zero between launches

  // ---- launch facts the kernels need (set by the CUDA backend from the plan) -------------
  int64_t items_per_cta = 1;   ///< Stream / WS: contiguous items of one persistent CTA
  int32_t ring_stages = 0;     ///< WS: stages of the shared-memory ring
  int32_t conv_dim_first = 1;  ///< Stream: window layout in its stage (1 DS, 0 SD)
};

/// commit / flush (SPEC §4): fold records into checkpoints. Never touches the conv window.
struct CommitParams {
  int32_t B = 0;
  int32_t H = 0;
  int32_t null_slot = 0;
  const int32_t* slots = nullptr;  ///< [>=B] or [>=B, >=1]: the checkpoint slot
  int64_t slots_stride0 = 0;
  const int32_t* record_rows = nullptr;  ///< optional, default the checkpoint slot
  int64_t record_rows_stride = 0;
  const int32_t* counts = nullptr;  ///< commit: fold counts; nullptr = flush (use pending)
  int64_t counts_stride = 0;

  void* state = nullptr;
  int32_t state_bf16 = 0;
  int64_t state_slots = 0;
  int64_t state_slot_stride = 0;

  const float* correction = nullptr;
  int64_t correction_row = 0;
  const float* key_gate = nullptr;
  int64_t key_gate_row = 0;
  int64_t record_rows_n = 0;
  int32_t Qr = 0;
  int32_t* pending = nullptr;  ///< flush reads it and sets it to 0
  int64_t pending_stride = 0;

  uint32_t* error_flags = nullptr;
  int32_t* error_index = nullptr;
  int32_t* arrivals = nullptr;  ///< as StepParams::arrivals (flush on CUDA)
};

}  // namespace kda
