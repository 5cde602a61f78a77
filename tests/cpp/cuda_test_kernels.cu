// tests/cpp/cuda_test_kernels.cu — device helpers of the GPU tests (cuda_test_kernels.h).
#include "cuda_test_kernels.h"

namespace kda::test {
namespace {

__global__ void slow_copy_kernel(unsigned char* dst, const unsigned char* src, std::size_t bytes, unsigned spin_ns) {
  cudaTriggerProgrammaticLaunchCompletion();
  const unsigned long long t0 = clock64();
  // ~1.4-2 GHz: spin_ns · 2 cycles is at least spin_ns
  while (clock64() - t0 < 2ull * spin_ns) {}
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < bytes;
       i += std::size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

cudaError_t launch_slow_copy(void* dst, const void* src, std::size_t bytes, unsigned spin_ns, cudaStream_t stream) {
  slow_copy_kernel<<<64, 256, 0, stream>>>(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                                           bytes, spin_ns);
  return cudaGetLastError();
}

}  // namespace kda::test
