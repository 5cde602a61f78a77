// src/cuda/cuda_backend.cu — the CUDA backend: device facts, device buffers, the error slot,
// and the dispatch from a plan to one kernel instantiation (src/cuda/inst/).
#include <cuda_runtime.h>

#include <climits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "backend.h"
#include "kda/cuda/config.h"
#include "kda/heuristics.h"
#include "launch.h"
#include "plan/counters.h"

namespace kda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("kda-decode CUDA: ") + what + ": " + cudaGetErrorString(e));
}

/// Makes `dev` current for the scope, restoring the caller's device after.
struct DeviceGuard {
  int prev = -1;
  explicit DeviceGuard(int dev) {
    check(cudaGetDevice(&prev), "cudaGetDevice");
    if (prev != dev) check(cudaSetDevice(dev), "cudaSetDevice");
  }
  ~DeviceGuard() {
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev) cudaSetDevice(prev);
  }
};

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(int dev, std::size_t n) : dev_(dev), n_(n) {
    DeviceGuard g(dev_);
    check(cudaMalloc(&p_, n ? n : 1), "cudaMalloc");
  }
  ~CudaBuffer() override {
    if (p_) cudaFree(p_);
  }
  void* data() override { return p_; }
  std::size_t bytes() const override { return n_; }
  void upload(const void* host, std::size_t n) override {
    DeviceGuard g(dev_);
    check(cudaMemcpy(p_, host, n, cudaMemcpyHostToDevice), "cudaMemcpy (weights)");
  }

 private:
  int dev_;
  std::size_t n_;
  void* p_ = nullptr;
};

/// CTAs per SM of the Wide verify kernels' small-grid form (cuda_config::small_grid_verify).
constexpr int kSmall = cuda_config::kSmallGridVerifyCtasPerSm;

/// Launches a plan's Split/Wide instantiation and records which one (counters.h: the tests hold
/// a plan to the kernel form it names).
template <int SPLIT, class StateT, int Q, bool GATE_FB, int MB = 4, unsigned KINDS = cuda_config::kAllStepKinds>
cudaError_t launch_step_kernel(const StepParams& p, const Plan& plan, cudaStream_t s) {
  counters::last_step_kernel_q.store(Q, std::memory_order_relaxed);
  counters::last_step_kernel_ctas_per_sm.store(cuda_config::step_kernel_ctas_per_sm(SPLIT, Q, MB),
                                               std::memory_order_relaxed);
  counters::last_step_chunks_per_pass.store(
      cuda_config::step_chunks_per_pass(cuda_config::chunks_per_pass(SPLIT, Q, MB, int(sizeof(StateT))), SPLIT,
                                        p.ring_stages, p.mode == int(StepMode::kPerToken)),
      std::memory_order_relaxed);
  counters::last_step_fold_warps.store(cuda_config::fold_warps(SPLIT, Q, MB), std::memory_order_relaxed);
  counters::last_step_kernel_gate_fb.store(GATE_FB ? 1 : 0, std::memory_order_relaxed);
  counters::last_step_kernel_kinds.store(int(KINDS), std::memory_order_relaxed);
  return cuda::launch_step<SPLIT, StateT, Q, GATE_FB, MB, KINDS>(p, plan.ctas, plan.smem, s);
}

/// The q = 1 instantiations for the kinds that store their rows (decode, per_token) or for the others.
constexpr unsigned kStoring = cuda_config::kStoringStepKinds, kRecording = cuda_config::kRecordingStepKinds;
/// The narrow form's instantiation (cuda_config::narrow_form) is the one compiled for its CTAs per SM.
constexpr int kNarrowMb = cuda_config::kNarrowCtasPerSm;
static_assert(kNarrowMb != heuristics::kStepBf16Q1CtasPerSm, "the narrow form needs its own instantiation");

/// The fold-warp twins of the small-grid form (cuda_config::fold_warps): without the F_B path only.
constexpr int kFoldTwin = cuda_config::kFoldWarpsMinBlocks;

/// The step kinds of the Wide verify kernels compiled for MB CTAs per SM: the twins run fused
/// steps only (cuda_config::kFoldTwinStepKinds), the other forms every kind.
template <int MB>
constexpr unsigned kWideVerifyKinds = MB == kFoldTwin ? cuda_config::kFoldTwinStepKinds : cuda_config::kAllStepKinds;

/// The Wide verify kernels compiled for MB CTAs per SM: run-time q with and without F_B, q = 2,
/// 3, 4, 8 without; q = 16 only in the small-grid form and its twins (its shared memory, 105 KiB
/// and more, never lets more than two CTAs share an SM).
template <class StateT, int MB>
cudaError_t set_wide_attributes(int64_t smem) {
  constexpr unsigned KN = kWideVerifyKinds<MB>;
  cudaError_t e = cudaSuccess;
  if constexpr (MB != kFoldTwin) e = cuda::set_step_attributes<1, StateT, 0, true, MB>(smem);
  for (cudaError_t x : {cuda::set_step_attributes<1, StateT, 0, false, MB, KN>(smem),
                        cuda::set_step_attributes<1, StateT, 2, false, MB, KN>(smem),
                        cuda::set_step_attributes<1, StateT, 3, false, MB, KN>(smem),
                        cuda::set_step_attributes<1, StateT, 4, false, MB, KN>(smem),
                        cuda::set_step_attributes<1, StateT, 8, false, MB, KN>(smem)})
    if (e == cudaSuccess) e = x;
  if constexpr (MB == kSmall || MB == kFoldTwin)
    if (e == cudaSuccess) e = cuda::set_step_attributes<1, StateT, 16, false, MB, KN>(smem);
  return e;
}

/// A Wide verify step (q ≥ 2) on the kernel compiled for MB CTAs per SM: run-time q with the F_B
/// path in gate mode 0, else without it, q = 2, 3, 4, 8 (16: small-grid form and its twins) with
/// their own.
template <class StateT, int MB>
cudaError_t launch_wide_verify(const StepParams& p, const Plan& plan, cudaStream_t s) {
  constexpr unsigned KN = kWideVerifyKinds<MB>;
  if constexpr (MB != kFoldTwin)
    if (plan.gate_mode == GateMode::kPerItem) return launch_step_kernel<1, StateT, 0, true, MB>(p, plan, s);
  switch (p.q) {
    case 2: return launch_step_kernel<1, StateT, 2, false, MB, KN>(p, plan, s);
    case 3: return launch_step_kernel<1, StateT, 3, false, MB, KN>(p, plan, s);
    case 4: return launch_step_kernel<1, StateT, 4, false, MB, KN>(p, plan, s);
    case 8: return launch_step_kernel<1, StateT, 8, false, MB, KN>(p, plan, s);
    case 16:
      if constexpr (MB == kSmall || MB == kFoldTwin)
        return launch_step_kernel<1, StateT, 16, false, MB, KN>(p, plan, s);
      break;
    default: break;
  }
  return launch_step_kernel<1, StateT, 0, false, MB, KN>(p, plan, s);
}

/// The Wide verify kernels' dense form (cuda_config::kDenseVerifyCtasPerSm): q = 2, 3, 4 without
/// the F_B path, both state dtypes.
constexpr int kDense = cuda_config::kDenseVerifyCtasPerSm;
template <class StateT>
cudaError_t set_dense_attributes(int64_t smem) {
  cudaError_t e = cudaSuccess;
  constexpr unsigned KN = cuda_config::kDenseVerifyStepKinds;
  for (cudaError_t x : {cuda::set_step_attributes<1, StateT, 2, false, kDense, KN>(smem),
                        cuda::set_step_attributes<1, StateT, 3, false, kDense, KN>(smem),
                        cuda::set_step_attributes<1, StateT, 4, false, kDense, KN>(smem)})
    if (e == cudaSuccess) e = x;
  return e;
}

/// A Wide verify step on a plan of five CTAs per SM (heuristics::wide_verify_ctas_per_sm names
/// only steps the dense form has; anything else runs the four-CTA form's kernel).
template <class StateT>
cudaError_t launch_wide_verify_dense(const StepParams& p, const Plan& plan, cudaStream_t s) {
  constexpr unsigned KN = cuda_config::kDenseVerifyStepKinds;
  if (plan.gate_mode != GateMode::kPerItem && (KN & cuda_config::step_kind(StepMode(p.mode))) != 0) switch (p.q) {
      case 2: return launch_step_kernel<1, StateT, 2, false, kDense, KN>(p, plan, s);
      case 3: return launch_step_kernel<1, StateT, 3, false, kDense, KN>(p, plan, s);
      case 4: return launch_step_kernel<1, StateT, 4, false, kDense, KN>(p, plan, s);
      default: break;
    }
  return launch_wide_verify<StateT, 4>(p, plan, s);
}

template <int SPLIT>
cudaError_t set_attrs(int64_t smem) {
  cudaError_t e = cudaSuccess;
  constexpr int kBf16Q1 = cuda_config::split_q1_min_blocks(SPLIT, 2);  // Split's bf16 q = 1 form
  for (cudaError_t x : {cuda::set_step_attributes<SPLIT, float, 1, true>(smem),
                        cuda::set_step_attributes<SPLIT, uint16_t, 1, true, kBf16Q1>(smem),
                        cuda::set_step_attributes<SPLIT, float, 1, true, 4, kStoring>(smem)})
    if (e == cudaSuccess) e = x;
  if constexpr (SPLIT > 1)
    e = e == cudaSuccess ? cuda::set_step_attributes<SPLIT, uint16_t, 1, true, kBf16Q1, kStoring>(smem) : e;
  if constexpr (SPLIT == 1) {  // the verify kernels in both forms (set_wide_attributes)
    for (cudaError_t x : {cuda::set_step_attributes<1, uint16_t, 1, false, 6, kStoring>(smem),
                          cuda::set_step_attributes<1, uint16_t, 1, false, 6, kRecording>(smem),
                          cuda::set_step_attributes<1, float, 1, false, 6>(smem),
                          cuda::set_step_attributes<1, float, 1, false, 5>(smem),
                          cuda::set_step_attributes<1, float, 1, false, 4, kStoring>(smem),
                          cuda::set_step_attributes<1, float, 1, false, 4>(smem), set_wide_attributes<float, 4>(smem),
                          set_wide_attributes<uint16_t, 4>(smem), set_wide_attributes<float, kSmall>(smem),
                          set_wide_attributes<uint16_t, kSmall>(smem), set_wide_attributes<float, kFoldTwin>(smem),
                          set_wide_attributes<uint16_t, kFoldTwin>(smem), set_dense_attributes<float>(smem),
                          set_dense_attributes<uint16_t>(smem)})
      if (e == cudaSuccess) e = x;
  } else {
    for (cudaError_t x : {cuda::set_step_attributes<SPLIT, float, 0, true>(smem),
                          cuda::set_step_attributes<SPLIT, uint16_t, 0, true>(smem),
                          cuda::set_step_attributes<SPLIT, float, 0, false>(smem),
                          cuda::set_step_attributes<SPLIT, uint16_t, 0, false>(smem)})
      if (e == cudaSuccess) e = x;
  }
  return e;
}

/// The Split/Wide instantiation of a plan: q = 1 steps have their own (constant offsets,
/// token vectors in registers; without the F_B path, one cut for six CTAs per SM, which bf16
/// decode and append and fp32 append run where the plan lays them out so, fp32 one for five (append
/// where six CTAs' records do not fit), and Wide fp32 ones for
/// four, which gate modes 1 and 2 run elsewhere; decode and per_token on instantiations of their own
/// where those are built, the other kinds on Wide bf16's six-CTA one too: cuda_config::step_kind);
/// other q without the F_B gate path where the plan's gate mode does not need it, and q = 2, 3, 4,
/// 8, 16 on Wide there with their own (q fixed at compile time; other q run the run-time q one),
/// each Wide one in two forms: for four CTAs per SM, and for two where the plan lays out at most
/// two (cuda_config::small_grid_verify); the latter's fold-warp twins (without the F_B path) take a
/// fused step on a plan of one CTA per SM (cuda_config::launches_fold_twins); q = 2, 3, 4 also in
/// the dense form, on a plan of five (cuda_config::kDenseVerifyCtasPerSm).
template <int SPLIT, class StateT>
cudaError_t launch_split(const StepParams& p, const Plan& plan, cudaStream_t s) {
  if (p.q == 1) {
    // Wide in gate modes 1 and 2: six CTAs per SM where the plan lays them out so (bf16 state:
    // heuristics::kStepBf16Q1CtasPerSm; fp32 append: kStepF32AppendCtasPerSm, five where six CTAs' records do not
    // fit, on the fp32 kernel compiled for five), else fp32 at four; bf16 decode and
    // per_token on the narrow form where the plan names its threads (heuristics::narrow_step).
    // Decode and per_token run instantiations for those two kinds alone (no records, no fold, the
    // token's update kept) everywhere but Wide bf16 below six CTAs per SM; append, record and fused
    // run ones for those three kinds alone (without the update) on Wide bf16 at six CTAs per SM.
    const bool keeps = cuda_config::stores_updated_rows(StepMode(p.mode));
    if constexpr (SPLIT == 1) {
      if (plan.gate_mode != GateMode::kPerItem) {
        if constexpr (sizeof(StateT) == 4) {
          // fp32 plans lay out six or five only for append (a ladder knob may ask it of decode: four then)
          // (append, record and fused on their kinds' own form were 2–6% slower: the kernel for every kind)
          if (keeps) return launch_step_kernel<1, float, 1, false, 4, kStoring>(p, plan, s);
          if (plan.ctas_per_sm == 5) return launch_step_kernel<1, float, 1, false, 5>(p, plan, s);
          if (plan.ctas_per_sm > 4) return launch_step_kernel<1, float, 1, false, 6>(p, plan, s);
          return launch_step_kernel<1, float, 1, false, 4>(p, plan, s);
        } else {
          if constexpr (kNarrowMb > 0)
            if (keeps && plan.threads == cuda_config::kNarrowThreads)
              return launch_step_kernel<1, StateT, 1, false, kNarrowMb, kStoring>(p, plan, s);
          if (plan.ctas_per_sm > 4)
            return keeps ? launch_step_kernel<1, StateT, 1, false, 6, kStoring>(p, plan, s)
                         : launch_step_kernel<1, StateT, 1, false, 6, kRecording>(p, plan, s);
          return launch_step_kernel<1, StateT, 1, true>(p, plan, s);
        }
      }
      if constexpr (sizeof(StateT) == 4)
        if (keeps) return launch_step_kernel<1, float, 1, true, 4, kStoring>(p, plan, s);
      return launch_step_kernel<1, StateT, 1, true>(p, plan, s);
    } else {
      constexpr int MB = cuda_config::split_q1_min_blocks(SPLIT, int(sizeof(StateT)));
      if (keeps) return launch_step_kernel<SPLIT, StateT, 1, true, MB, kStoring>(p, plan, s);
      return launch_step_kernel<SPLIT, StateT, 1, true, MB>(p, plan, s);
    }
  }
  if constexpr (SPLIT == 1) {
    if (plan.ctas_per_sm == kDense) return launch_wide_verify_dense<StateT>(p, plan, s);
    if (!cuda_config::small_grid_verify(1, p.q, plan.ctas_per_sm)) return launch_wide_verify<StateT, 4>(p, plan, s);
    if (cuda_config::launches_fold_twins(1, p.ring_stages, p.mode == int(StepMode::kFused), plan.ctas_per_sm,
                                         plan.gate_mode == GateMode::kPerItem))
      return launch_wide_verify<StateT, kFoldTwin>(p, plan, s);
    return launch_wide_verify<StateT, kSmall>(p, plan, s);
  } else {
    if (plan.gate_mode == GateMode::kPerItem) return launch_step_kernel<SPLIT, StateT, 0, true>(p, plan, s);
    return launch_step_kernel<SPLIT, StateT, 0, false>(p, plan, s);
  }
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int dev) : dev_(dev) {
    DeviceGuard g(dev_);
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, dev_), "cudaGetDeviceProperties");
    info_.device = Device::kCUDA;
    info_.sms = prop.multiProcessorCount;
    info_.cc_major = prop.major;
    info_.cc_minor = prop.minor;
    int optin = 0;
    check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev_), "cudaDeviceGetAttribute");
    info_.smem_optin = optin;
    int per_sm = 0;
    check(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev_), "cudaDeviceGetAttribute");
    info_.smem_per_sm = per_sm;
    info_.clusters = prop.major >= 9;
    info_.l2_bytes = prop.l2CacheSize;  // heuristics::gate_logits_keep_in_l2
    // peak DRAM bandwidth: two transfers a memory clock (kHz) over the bus (bits); heuristics::narrow_step
    int mem_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev_) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev_) == cudaSuccess)
      info_.dram_gbps = int64_t(2) * mem_khz * (bus_bits / 8) / 1000000;
    (void)cudaGetLastError();  // (an attribute the driver does not report is not an error of the step)
    // Every kernel may use up to the device's opt-in shared memory; plans stay below it.
    const int64_t smem = optin;
    for (cudaError_t e : {set_attrs<1>(smem), set_attrs<2>(smem), set_attrs<4>(smem), set_attrs<8>(smem),
                          cuda::set_ws_attributes<float>(smem), cuda::set_ws_attributes<uint16_t>(smem),
                          cuda::set_gate_kernel_attributes()}) {
      if (e == cudaErrorInvalidDeviceFunction || e == cudaErrorNoKernelImageForDevice)
        throw std::runtime_error("kda-decode CUDA: this build has no kernels for sm_" + std::to_string(prop.major) +
                                 std::to_string(prop.minor) + " (" + prop.name +
                                 "); rebuild with KDA_CUDA_ARCHS naming it (built for sm_90a / sm_100a)");
      check(e, "cudaFuncSetAttribute");
    }
    err_ = std::make_unique<CudaBuffer>(dev_, 8);
    reset_errors(nullptr);
    check(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
  }

  Device device() const override { return Device::kCUDA; }
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(std::size_t n) override { return std::make_unique<CudaBuffer>(dev_, n); }
  void download(void* host, const void* src, std::size_t n) override {
    DeviceGuard g(dev_);
    // NOTES: weights may have been written on any stream (a loader's side stream is often
    // non-blocking, so a plain cudaMemcpy would not wait for it). Construction and
    // process_weights_after_loading are not hot and never captured: wait for the device.
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (before reading weights)");
    check(cudaMemcpy(host, src, n, cudaMemcpyDeviceToHost), "cudaMemcpy (weights)");
  }

  void step(const StepParams& p, const Plan& plan, void* stream) override {
    DeviceGuard g(dev_);
    const auto s = static_cast<cudaStream_t>(stream);
    cudaError_t e = cudaErrorInvalidValue;
    const bool bf = p.state_bf16 != 0;
    if (plan.gate_mode == GateMode::kShared) check(cuda::launch_gate_kernel(p, s), "gate launch");
    if (plan.variant == Variant::kWS) {
      e = bf ? cuda::launch_ws<uint16_t>(p, plan.ctas, plan.smem, s)
             : cuda::launch_ws<float>(p, plan.ctas, plan.smem, s);
      check(e, "ws launch");
      return;
    }
    switch (plan.split) {
      case 1: e = bf ? launch_split<1, uint16_t>(p, plan, s) : launch_split<1, float>(p, plan, s); break;
      case 2: e = bf ? launch_split<2, uint16_t>(p, plan, s) : launch_split<2, float>(p, plan, s); break;
      case 4: e = bf ? launch_split<4, uint16_t>(p, plan, s) : launch_split<4, float>(p, plan, s); break;
      case 8: e = bf ? launch_split<8, uint16_t>(p, plan, s) : launch_split<8, float>(p, plan, s); break;
      default: throw std::runtime_error("kda-decode CUDA: no kernel for split " + std::to_string(plan.split));
    }
    check(e, "step launch");
  }

  void commit(const CommitParams& p, void* stream) override {
    DeviceGuard g(dev_);
    const auto s = static_cast<cudaStream_t>(stream);
    check(p.state_bf16 ? cuda::launch_commit<uint16_t>(p, s) : cuda::launch_commit<float>(p, s), "commit launch");
  }

  uint32_t* error_flags() override { return static_cast<uint32_t*>(err_->data()); }
  int32_t* error_index() override { return static_cast<int32_t*>(err_->data()) + 1; }

  Status read_status(void* stream) override {
    DeviceGuard g(dev_);
    const auto s = static_cast<cudaStream_t>(stream);
    uint32_t host[2] = {0, 0};
    check(cudaMemcpyAsync(host, err_->data(), 8, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync (status)");
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize (status)");
    reset_errors(s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize (status)");
    Status st;
    st.flags = host[0];
    st.first_request = host[0] ? int64_t(int32_t(host[1])) : -1;
    return st;
  }

 private:
  void reset_errors(cudaStream_t s) {
    static const int32_t init[2] = {0, INT32_MAX};
    check(cudaMemcpyAsync(err_->data(), init, 8, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync (status reset)");
  }

  int dev_;
  DeviceInfo info_;
  std::unique_ptr<CudaBuffer> err_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device_id) { return std::make_unique<CudaBackend>(device_id); }

bool cuda_backend_built() { return true; }

}  // namespace kda
