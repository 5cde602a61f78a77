// src/cuda/step_launch.cuh — definitions behind launch.h, included by the instantiation
// files only.
#pragma once

#include "kda/cuda/commit_kernel.cuh"
#include "kda/cuda/step_kernel.cuh"
#include "kda/cuda/ws_kernel.cuh"
#include "launch.h"

namespace kda::cuda {

/// Raises a kernel's dynamic shared-memory limit to the device's opt-in limit less the
/// kernel's static shared memory (the sum may not exceed the opt-in limit).
template <class Kernel>
cudaError_t set_max_dynamic_smem(Kernel kernel, int64_t optin) {
  cudaFuncAttributes fa{};
  cudaError_t e = cudaFuncGetAttributes(&fa, kernel);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(optin - int64_t(fa.sharedSizeBytes)));
}

/// Launches `kernel(p)` on a grid of CTAs of `threads` with programmatic dependent launch
/// and, when `cluster` > 1, thread-block clusters of that size.
/// NOTES: programmatic dependent launch: every kernel of a step reads only weights before
/// cudaGridDependencySynchronize(), so it may start while the previous one drains.
template <class Kernel>
cudaError_t launch_pdl(Kernel kernel, const StepParams& p, dim3 grid, int threads, int64_t smem, cudaStream_t stream,
                       int cluster = 1) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(unsigned(threads), 1, 1);
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cluster > 1) {
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = unsigned(cluster);
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    cfg.numAttrs = 2;
  }
  return cudaLaunchKernelEx(&cfg, kernel, p);
}

template <int SPLIT, class StateT, int Q, bool GATE_FB, int MIN_BLOCKS, unsigned KINDS>
cudaError_t launch_step(const StepParams& p, int64_t ctas, int64_t smem, cudaStream_t stream) {
  using T = StepTraits<SPLIT, StateT, Q, GATE_FB, MIN_BLOCKS, KINDS>;
  if ((KINDS & cuda_config::step_kind(StepMode(p.mode))) == 0) return cudaErrorInvalidValue;  // its code is not there
  // (the fold-warp twins: kThreads and their fold warps, StepTraits::kBoundThreads)
  return launch_pdl(kda_step_kernel<T>, p, dim3(unsigned(ctas)), T::kBoundThreads, smem, stream, SPLIT);
}

template <class StateT>
cudaError_t launch_ws(const StepParams& p, int64_t ctas, int64_t smem, cudaStream_t stream) {
  return launch_pdl(kda_ws_kernel<StateT>, p, dim3(unsigned(ctas)), cuda_config::kWsThreads, smem, stream);
}

template <class StateT>
cudaError_t set_ws_attributes(int64_t max_smem) {
  return set_max_dynamic_smem(kda_ws_kernel<StateT>, max_smem);
}

template <int SPLIT, class StateT, int Q, bool GATE_FB, int MIN_BLOCKS, unsigned KINDS>
cudaError_t set_step_attributes(int64_t max_smem) {
  using T = StepTraits<SPLIT, StateT, Q, GATE_FB, MIN_BLOCKS, KINDS>;
  return set_max_dynamic_smem(kda_step_kernel<T>, max_smem);
}

template <class StateT>
cudaError_t launch_commit(const CommitParams& p, cudaStream_t stream) {
  const unsigned ctas = unsigned(int64_t(p.B) * p.H * kCommitSplit);
  kda_commit_kernel<StateT><<<ctas, cuda_config::kCommitThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace kda::cuda

#define KDA_INSTANTIATE_STEP_FORM(SPLIT, STATE, Q, GATE_FB, MIN_BLOCKS, KINDS)              \
  template cudaError_t kda::cuda::launch_step<SPLIT, STATE, Q, GATE_FB, MIN_BLOCKS, KINDS>( \
      const kda::StepParams&, int64_t, int64_t, cudaStream_t);                              \
  template cudaError_t kda::cuda::set_step_attributes<SPLIT, STATE, Q, GATE_FB, MIN_BLOCKS, KINDS>(int64_t);
#define KDA_INSTANTIATE_STEP_OCC(SPLIT, STATE, Q, GATE_FB, MIN_BLOCKS) \
  KDA_INSTANTIATE_STEP_FORM(SPLIT, STATE, Q, GATE_FB, MIN_BLOCKS, kda::cuda_config::kAllStepKinds)
#define KDA_INSTANTIATE_STEP(SPLIT, STATE, Q, GATE_FB) KDA_INSTANTIATE_STEP_OCC(SPLIT, STATE, Q, GATE_FB, 4)

#define KDA_INSTANTIATE_WS(STATE)                                                                           \
  template cudaError_t kda::cuda::launch_ws<STATE>(const kda::StepParams&, int64_t, int64_t, cudaStream_t); \
  template cudaError_t kda::cuda::set_ws_attributes<STATE>(int64_t);
