// src/cuda/launch.h — host entry points of the CUDA kernels, one explicit instantiation per
// file in src/cuda/inst/ (so they compile in parallel), called by cuda_backend.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kda/cuda/config.h"
#include "kda/params.h"

namespace kda::cuda {

/// Launches the Split/Wide step kernel with SPLIT CTAs per item (a cluster when SPLIT > 1),
/// Q = 1 (q = 1 steps) or 0 (any q), GATE_FB false for gate modes 1 and 2 only;
/// MIN_BLOCKS the CTAs per SM its register budget is cut for; p.ring_stages state stages; KINDS
/// the step kinds it runs (cuda_config::step_kind bits; a step of another kind:
/// cudaErrorInvalidValue, nothing launched).
template <int SPLIT, class StateT, int Q, bool GATE_FB, int MIN_BLOCKS = 4, unsigned KINDS = cuda_config::kAllStepKinds>
cudaError_t launch_step(const StepParams& p, int64_t ctas, int64_t smem, cudaStream_t stream);

/// Raises the kernel's dynamic shared-memory limit; fails with
/// cudaErrorInvalidDeviceFunction when the build has no image for the current GPU.
template <int SPLIT, class StateT, int Q, bool GATE_FB, int MIN_BLOCKS = 4, unsigned KINDS = cuda_config::kAllStepKinds>
cudaError_t set_step_attributes(int64_t max_smem);

/// Launches the warp-specialised persistent WS kernel on `ctas` CTAs (one per SM;
/// p.items_per_cta and p.ring_stages set).
template <class StateT>
cudaError_t launch_ws(const StepParams& p, int64_t ctas, int64_t smem, cudaStream_t stream);

template <class StateT>
cudaError_t set_ws_attributes(int64_t max_smem);

/// Launches the gate mode 1 kernel (gate_kernel.cuh) over the step's B·q rows into
/// p.gate_ws; and raises its dynamic shared-memory limit.
cudaError_t launch_gate_kernel(const StepParams& p, cudaStream_t stream);
cudaError_t set_gate_kernel_attributes();

/// Launches commit / flush.
template <class StateT>
cudaError_t launch_commit(const CommitParams& p, cudaStream_t stream);

}  // namespace kda::cuda
