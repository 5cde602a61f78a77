// The gate mode 1 kernel (one GEMM of the step's gate logits on tensor cores) and its launch:
// a plain __global__ function, so its header is included by this one file only.
#include "../step_launch.cuh"
#include "kda/cuda/gate_kernel.cuh"

namespace kda::cuda {

/// Grid (H, tiles of p.gate_tile_rows step rows); with programmatic dependent launch: it reads
/// only F_B before its wait, and releases the step kernel after that wait (gate_kernel.cuh).
cudaError_t launch_gate_kernel(const StepParams& p, cudaStream_t stream) {
  const int m = p.gate_tile_rows;
  if (m != 16 && m != 32 && m != cuda_config::kGateRowsPerCta) return cudaErrorInvalidValue;
  const int64_t tiles = (int64_t(p.B) * p.q + m - 1) / m;
  return launch_pdl(kda_gate_kernel, p, dim3(unsigned(p.H), unsigned(tiles)), cuda_config::kGateThreads,
                    cuda_config::gate_smem(m), stream);
}

cudaError_t set_gate_kernel_attributes() {
  return cudaFuncSetAttribute(kda_gate_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              int(cuda_config::gate_smem()));
}

}  // namespace kda::cuda
