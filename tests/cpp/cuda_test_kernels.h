// tests/cpp/cuda_test_kernels.h — small device helpers of the GPU tests (cuda_test_kernels.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace kda::test {

/// A stand-in for the engine's previous kernel: it releases its programmatic dependents at
/// once (as a kernel that triggers early does), then spins for `spin_ns` and only then copies
/// `bytes` from `src` to `dst`. A dependent that reads `dst` before it waits on this grid reads
/// the old bytes.
cudaError_t launch_slow_copy(void* dst, const void* src, std::size_t bytes, unsigned spin_ns, cudaStream_t stream);

}  // namespace kda::test
