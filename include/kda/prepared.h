// kda/prepared.h — the public C++ API (SPEC §5): kda::PreparedKda.
//
//   kda::LayerWeights w{...};                       // views of the layer's weights
//   kda::PreparedKda kda(w, {{{StepMode::kDecode, 64, 1}, {}}}, /*conv_dim_first=*/false);
//   kda.prepare(caches);                            // plans every policy key, validates
//   kda.run(projected, out, caches, {slots});       // on the caller's stream, no allocation
//   kda::Status s = kda.status(stream);             // caller errors found in the data
//
// Errors in shapes, dtypes, strides and devices are thrown as std::invalid_argument whose
// message names the operand, what was expected and what came. Errors in the *data* (slot
// ids, accepted counts, pending counts) are flagged and read with status() (SPEC §4).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kda/plan.h"
#include "kda/types.h"

namespace kda {

/// The layer's weights (SPEC §2). Views are borrowed except conv_weight and norm_weight,
/// from which PreparedKda derives its own fp32 copies.
struct LayerWeights {
  TensorView conv_weight;  ///< [3D, 1, W] fp32 or bf16 (nn.Conv1d depthwise weight)
  TensorView conv_bias;    ///< [3D] fp32, optional (data == nullptr: none)
  TensorView f_b_weight;   ///< [D, R] bf16, nn.Linear(R, D).weight; optional in gate mode 2
  TensorView A_log;        ///< [H] fp32
  TensorView dt_bias;      ///< [D] fp32
  TensorView norm_weight;  ///< [K] any float dtype (kept as fp32)
  float eps = 1e-5f;       ///< RMSNorm epsilon
  std::optional<float> lower_bound;  ///< none: softplus gate; else in [-5, 0)
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
  TensorView slots;        ///< int32: decode [>=B]; per_token [>=B, >=q]; record/fused [>=B] or [>=B, 1]
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
  TensorView out_gate;  ///< [rows, D] bf16
  TensorView gate_in;   ///< [rows, R] (modes 0, 1) or [rows, D] (mode 2) bf16
  TensorView beta;      ///< [rows, H] bf16
};

class Backend;  // CPU or CUDA implementation (src/)

/// The prepared KDA decode core of one layer (SPEC §5).
class PreparedKda {
 public:
  /// Validates the weights and derives the decode copies (conv [3, W, D] fp32, norm fp32) on
  /// the weights' device. `policies` maps step keys to policies; keys not listed are
  /// planned on first use from `default_policy`. `conv_dim_first`: true = DS conv layout
  /// [slots, 3D, window], false = SD [slots, window, 3D] (vLLM's default). `null_slot`:
  /// the pad slot id besides negatives (vLLM's NULL_BLOCK_ID = 0); -1 disables it.
  /// Throws std::invalid_argument on bad weights.
  PreparedKda(const LayerWeights& weights,
              std::unordered_map<StepKey, Policy, StepKeyHash> policies = {},
              bool conv_dim_first = false, int null_slot = 0, Policy default_policy = {});
  ~PreparedKda();
  PreparedKda(const PreparedKda&) = delete;
  PreparedKda& operator=(const PreparedKda&) = delete;

  /// Plans every policy key for these caches, validates them, sets kernel attributes.
  void prepare(const Caches& caches);

  /// One step from the packed projection [rows, pitch] bf16 (SPEC §2): columns qkv [0,3D)
  /// · out_gate [3D,4D) · gate_in [4D,4D+R) (mode 2: [4D,5D)) · beta next · padding.
  /// rows = B·q. Writes out [rows, D] bf16 and the caches of the step kind. Launches on
  /// args.stream, allocates nothing, never synchronises.
  void run(const TensorView& projected, const TensorView& out, const Caches& caches,
           const StepArgs& args);

  /// As run, from four separate input views (vLLM's buffers), no copy.
  void run_views(const InputViews& in, const TensorView& out, const Caches& caches,
                 const StepArgs& args);

  /// Folds, per request b, the first counts[b] records of its row into its checkpoint
  /// state slots[b] (SPEC §4). record_rows optional (default: the checkpoint slot).
  void commit(const Caches& caches, const TensorView& slots, const TensorView& record_rows,
              const TensorView& counts, void* stream = nullptr);

  /// commit with counts = pending[row], then pending[row] = 0.
  void flush(const Caches& caches, const TensorView& slots, const TensorView& record_rows,
             void* stream = nullptr);

  /// Recomputes the derived conv/norm copies in place (same addresses: captured CUDA graphs
  /// stay valid). The borrowed weights must still live where they did.
  void process_weights_after_loading(const LayerWeights& weights);

  /// Caller errors flagged since the last call; clears them. On CUDA it synchronises
  /// `stream` (only here).
  Status status(void* stream = nullptr);

  /// The plan for a key (planning it from the default policy if new), for inspection.
  const Plan& plan_for(const StepKey& key, const Caches& caches);

  int heads() const;
  int taps() const;
  Device device() const;
  const DeviceInfo& device_info() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------
// Helpers (SPEC §5)
// ---------------------------------------------------------------------------------------

/// nn.Conv1d depthwise weight [3D, 1, W] (fp32 or bf16, any strides, host memory) ->
/// decode layout [3, W, D] fp32, dense: out[s][j][c] = w[s·D + c][0][j].
std::vector<float> decode_conv_weight(const TensorView& w);

/// Operand description for stream_layout (only alignment facts matter).
struct StreamOperands {
  TensorView conv_state;
  TensorView state;
  bool conv_dim_first = false;
  int64_t input_row_stride_bytes = 0;  ///< packed pitch (or the views' row strides) in bytes
  int64_t out_row_stride_bytes = 0;
  int W = 4;
};
struct StreamLayout {
  bool dim_first = false;
  int64_t window = 0;
};
/// Can the streaming variant use 16-byte async copies for these operands? 16-byte aligned
/// row strides, conv slot stride and SD channel stride, and window >= W-2+q.
std::optional<StreamLayout> stream_layout(const StreamOperands& ops, int q);

/// Persistent CTAs for `items` items on `sms` SMs: two per SM, equal share:
/// per = ceil(items / (2·sms)), ctas = ceil(items / per).
int64_t stream_ctas(int64_t items, int sms);

/// Can the fused verify fold this layer's records? (VK-dense fp32 or bf16 state; any gate.)
bool deferred_supported(const TensorView& state, std::optional<float> lower_bound);

/// Does a fused step of this shape run a fused variant (else flush + record verify)?
bool replays(int H, int B, int q);

}  // namespace kda
