// kda/types.h — the contract's vocabulary (SPEC §1, §2, §5): dtypes, tensor views, step
// modes, gate modes, variants, step keys, policies and the caller-error flags.
//
// Framework-free: no CUDA, no torch, no Python. Every other header builds on this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace kda {

// ---------------------------------------------------------------------------------------
// Fixed sizes of the KDA layer (SPEC §1).
// ---------------------------------------------------------------------------------------
inline constexpr int kHeadDim = 128;  ///< K = V = 128.
inline constexpr int kRank = 128;     ///< R, rank of the low-rank gate projection F_B·f_a.
inline constexpr int kMaxQ = 16;      ///< tokens per request in one step, q ∈ [1, 16].
inline constexpr int kMaxTensorRank = 4;

enum class DType : int8_t { kBF16, kF16, kF32, kF64, kI32, kI64 };
enum class Device : int8_t { kCPU, kCUDA };

/// Size of one element of `t` in bytes.
std::size_t dtype_size(DType t);
/// "bf16", "f32", … (used in error messages).
const char* dtype_name(DType t);

/// A non-owning strided view of a tensor (like DLPack's DLTensor): data pointer, dtype,
/// device, shape and strides in *elements*. `data == nullptr` means "not given".
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCPU;
  int device_id = 0;
  int ndim = 0;
  int64_t shape[kMaxTensorRank] = {0, 0, 0, 0};
  int64_t strides[kMaxTensorRank] = {0, 0, 0, 0};

  bool defined() const { return data != nullptr; }
  int64_t size(int d) const { return shape[d]; }
  int64_t stride(int d) const { return strides[d]; }
  int64_t numel() const;
  bool is_contiguous() const;
  /// "[2, 3, 128] bf16 strides (384, 128, 1)" for messages.
  std::string describe() const;
};

/// Builds a view of a dense row-major tensor (strides derived from `shape`).
TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device = Device::kCPU,
                     int device_id = 0);
/// Builds a view with explicit strides (elements).
TensorView make_view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     std::initializer_list<int64_t> strides, Device device = Device::kCPU, int device_id = 0);

// ---------------------------------------------------------------------------------------
// Steps (SPEC §4).
// ---------------------------------------------------------------------------------------
enum class StepMode : int8_t {
  kDecode = 0,    ///< q = 1, state slots[b] -> out_slots[b]
  kPerToken = 1,  ///< verify: state after token t written to slots[b, t]
  kRecord = 2,    ///< verify from a checkpoint; writes records, not the state
  kFused = 3,     ///< fold pending records into the checkpoint, then record-mode verify
  kAppend = 4,    ///< q = 1 decode from checkpoint + pending records; writes a record, the
                  ///< state only when the records row is full (SPEC §4 append)
};

/// What a step mode takes and touches. The validator, prepare() and the parameter builder
/// read these facts instead of testing modes, so a new mode is one row of kModes.
struct ModeTraits {
  bool single_token = false;     ///< q must be 1
  bool per_token_slots = false;  ///< slots [>=B, >=q] (token t writes column t), else [>=B] or [>=B, 1]
  bool out_slots = false;        ///< takes out_slots
  bool records = false;          ///< reads or writes the records (correction, key_gate); takes record_rows
  bool pending = false;          ///< reads pending (and, on CUDA, the per-row arrival counters)
};

struct ModeInfo {
  StepMode mode;
  const char* name;
  ModeTraits traits;
};

inline constexpr ModeInfo kModes[] = {
    {StepMode::kDecode, "decode", {.single_token = true, .out_slots = true}},
    {StepMode::kAppend, "append", {.single_token = true, .records = true, .pending = true}},
    {StepMode::kPerToken, "per_token", {.per_token_slots = true}},
    {StepMode::kRecord, "record", {.records = true}},
    {StepMode::kFused, "fused", {.records = true, .pending = true}},
};

constexpr const ModeTraits& mode_traits(StepMode m) {
  for (const ModeInfo& i : kModes)
    if (i.mode == m) return i.traits;
  return kModes[0].traits;
}
const char* mode_name(StepMode m);
/// Parses a name of kModes ("decode", "per_token", ...); throws ArgumentError naming "mode".
StepMode parse_mode(const std::string& s);

/// How z = F_B·f_a is computed (SPEC §5).
enum class GateMode : int8_t {
  kAuto = -1,        ///< the planner picks 0 or 1 with the variant
  kPerItem = 0,      ///< every (request, head) item computes its 128 logits from F_B[h]
  kShared = 1,       ///< one pass over F_B[h] serves several requests of the head
  kPrecomputed = 2,  ///< gate_in already holds F_B·f_a, D wide; F_B is not read
};
const char* gate_mode_name(GateMode g);
/// Parses "auto" | "0" | "1" | "2" (or "per_item", "shared", "precomputed"); throws
/// ArgumentError naming "gate_mode".
GateMode parse_gate_mode(const std::string& s);

/// Kernel families (SPEC §7). kCpu is the CPU backend's only variant. Every CUDA variant
/// runs the fused verify in one launch, so the SPEC's Fused / FusedWS are not separate names.
enum class Variant : int8_t {
  kAuto = 0,
  kCpu,
  kSplit,  ///< an item's V rows over a thread-block cluster (small batches)
  kWide,   ///< one CTA per item
  kWS,     ///< warp-specialised persistent CTAs (producer warp + shared-memory ring)
};
inline constexpr Variant kVariants[] = {Variant::kAuto, Variant::kCpu, Variant::kSplit, Variant::kWide, Variant::kWS};
const char* variant_name(Variant v);
/// Parses "auto" | "cpu" | "split" | "wide" | "ws"; throws ArgumentError naming "policy variant".
Variant parse_variant(const std::string& s);

/// The CTA form of Wide's q = 1 decode and per_token steps with bf16 state in gate modes 1 and 2: 256 threads at six
/// CTAs per SM, or the narrow form, 128 threads at cuda_config::kNarrowCtasPerSm (heuristics::narrow_step).
enum class NarrowForm : int8_t {
  kAuto = 0,  ///< the planner's rule: by the grid and the device's DRAM bandwidth per SM
  kOff,       ///< never the narrow form
  kOn,        ///< the narrow form wherever it applies (a grid beyond one wave of six CTAs per SM)
};
const char* narrow_form_name(NarrowForm n);
/// Parses "auto" | "on" | "off"; throws ArgumentError naming "policy narrow".
NarrowForm parse_narrow_form(const std::string& s);

/// The key a policy and a plan are stored under (SPEC §1): (mode, B, q).
struct StepKey {
  StepMode mode = StepMode::kDecode;
  int B = 0;
  int q = 1;
  bool operator==(const StepKey& o) const { return mode == o.mode && B == o.B && q == o.q; }
  std::string describe() const;
};

struct StepKeyHash {
  std::size_t operator()(const StepKey& k) const noexcept {
    return std::hash<int64_t>()((int64_t(k.B) << 16) ^ (int64_t(k.q) << 4) ^ int64_t(k.mode));
  }
};

/// What the caller fixes per step key (SPEC §5).
struct Policy {
  int64_t pitch = 0;  ///< packed-row pitch in elements; 0 = take it from the tensor
  GateMode gate_mode = GateMode::kAuto;
  Variant variant = Variant::kAuto;       ///< kAuto = the planner's pick, else forced
  NarrowForm narrow = NarrowForm::kAuto;  ///< Wide's bf16 q = 1 decode / per_token CTA form
};

// ---------------------------------------------------------------------------------------
// Caller errors found in the data (SPEC §4): flagged, never thrown, read with status().
// ---------------------------------------------------------------------------------------
enum ErrorFlag : uint32_t {
  kSlotRange = 1u << 0,  ///< a slot id >= the pool size
  kRowRange = 1u << 1,   ///< a records row or out_slots id outside [0, pool) or == null slot
  kAccepted = 1u << 2,   ///< accepted outside [1, window - W + 2] (per-token: or > row width)
  kPending = 1u << 3,    ///< pending (or a commit count) outside its range
  kPadStart = 1u << 4,   ///< a pad id at the per-token start slot slots[b, accepted - 1]
};

/// What status() returns: the flags raised since the last call and the lowest offending
/// request index (-1 when no flag is set).
struct Status {
  uint32_t flags = 0;
  int64_t first_request = -1;
  bool ok() const { return flags == 0; }
  std::string describe() const;
};

}  // namespace kda
