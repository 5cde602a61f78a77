// tests/cpp/test_cuda_numerics.cu — the device forms of the scalar functions of
// include/kda/numerics.h that differ from their host forms, checked on the GPU against the
// host's arithmetic over every input. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "kda/numerics.h"

namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

__device__ bool same_bf16(uint16_t got, uint16_t want) {
  const bool got_nan = (got & 0x7fffu) > 0x7f80u, want_nan = (want & 0x7fffu) > 0x7f80u;
  return got_nan || want_nan ? got_nan && want_nan : got == want;
}

/// Every fp32 bit pattern u in [base, base + n): f32_to_bf16 (one cvt) against the integer
/// form the host runs, and the packed pair form on (u, a second pattern derived from u).
/// Counts the mismatches and keeps the first offending pattern.
__global__ void bf16_forms(uint64_t base, uint64_t n, unsigned long long* bad, uint32_t* first) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t u = uint32_t(base + i), v = u * 2654435761u + 0x3c00u;
    const float f = kda::bits_float(u), g = kda::bits_float(v);
    const uint32_t pair = kda::f32x2_to_bf16x2(f, g);
    const bool ok = same_bf16(kda::f32_to_bf16(f), kda::f32_to_bf16_bits(f)) &&
                    same_bf16(uint16_t(pair & 0xffffu), kda::f32_to_bf16_bits(f)) &&
                    same_bf16(uint16_t(pair >> 16), kda::f32_to_bf16_bits(g));
    if (!ok) {
      atomicAdd(bad, 1ull);
      atomicMin(first, u);
    }
  }
}

TEST(CudaNumerics, Bf16ConversionMatchesTheIntegerFormEverywhere) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  unsigned long long* bad = nullptr;
  uint32_t* first = nullptr;
  ASSERT_EQ(cudaMalloc(&bad, sizeof *bad), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&first, sizeof *first), cudaSuccess);
  ASSERT_EQ(cudaMemset(bad, 0, sizeof *bad), cudaSuccess);
  ASSERT_EQ(cudaMemset(first, 0xff, sizeof *first), cudaSuccess);
  bf16_forms<<<4096, 256>>>(0, uint64_t(1) << 32, bad, first);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  unsigned long long nbad = 0;
  uint32_t ufirst = 0;
  ASSERT_EQ(cudaMemcpy(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(&ufirst, first, sizeof ufirst, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(bad);
  cudaFree(first);
  EXPECT_EQ(nbad, 0u) << "first fp32 pattern whose device bf16 differs: 0x" << std::hex << ufirst;
  // the host form itself on a few known values (round to nearest even, ties to even)
  EXPECT_EQ(kda::f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(kda::f32_to_bf16(kda::bits_float(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(kda::f32_to_bf16(kda::bits_float(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(kda::f32x2_to_bf16x2(1.0f, -2.0f), 0xc0003f80u);
}

}  // namespace
