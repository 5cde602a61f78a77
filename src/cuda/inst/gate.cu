// The gate mode 1 kernel (one GEMM of the step's gate logits on tensor cores) and its launch:
// a plain __global__ function, so its header is included by this one file only.
#include "../step_launch.cuh"
#include "kda/cuda/gate_kernel.cuh"

namespace kda::cuda {

/// Grid (H, row tiles); with programmatic dependent launch like the step kernels: it reads
/// only F_B before its wait, and the step kernel after it waits for it before reading z.
cudaError_t launch_gate_kernel(const StepParams& p, cudaStream_t stream) {
  const int64_t tiles = cuda_config::gate_ws_rows(int64_t(p.B) * p.q) / cuda_config::kGateRowsPerCta;
  return launch_pdl(kda_gate_kernel, p, dim3(unsigned(p.H), unsigned(tiles)), cuda_config::kGateThreads,
                    cuda_config::gate_smem(), stream);
}

cudaError_t set_gate_kernel_attributes() {
  return cudaFuncSetAttribute(kda_gate_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(cuda_config::gate_smem()));
}

}  // namespace kda::cuda
