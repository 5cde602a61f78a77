// tests/cpp/test_cuda_numerics.cu — the device forms of the scalar functions of
// include/kda/numerics.h that differ from their host forms, checked on the GPU against the
// host's arithmetic over every input. Skips without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
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

/// The special functions of the step (exp_, decay_of, sigmoidf_, silu, inv_sqrt_, and the sigmoid
/// and SiLU with the approximate reciprocal of the small-grid verify kernels) on the device
/// against double precision, over every fp32 input of their domains: the largest relative error
/// per function, in units of 2^-23, against its bound. The bounds hold for the IEEE forms and for
/// the hardware approximations of KDA_FAST_INTRINSICS (numerics.h NOTES): exp_ within 3 + 1.2·|x|
/// (`__expf`: 2 + ⌊1.173·|x|⌋ ulp, CUDA Programming Guide), the sigmoid within 4 + 1.2·|x| (the
/// exp's error and two roundings; with `rcp.approx`, 1 ulp, one more), 1/sqrt within 3 (`rsqrtf`: 2 ulp).
struct SfuErr {
  unsigned int worst[7];  // the largest error / bound per function (float bits: ordered as uint for ≥ 0)
  unsigned int first_bad[7];
};
__device__ void note(SfuErr* e, int f, double rel, double bound_ulps, uint32_t u) {
  const double r = rel / (bound_ulps * 0x1p-23);  // ≤ 1 within the bound
  atomicMax(&e->worst[f], __float_as_uint(float(r)));
  if (r > 1.0) atomicMin(&e->first_bad[f], u);
}
__global__ void sfu_forms(uint64_t n, SfuErr* e) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t u = uint32_t(i);
    const float x = __uint_as_float(u);
    if (!(fabsf(x) <= 80.0f)) continue;  // NaN, inf and |x| > 80 (e^x out of the normal range)
    const double ax = fabs(double(x));
    const double ex = exp(double(x));
    note(e, 0, fabs(double(kda::exp_(x)) - ex) / ex, 3.0 + 1.2 * ax, u);
    if (x <= 0.0f) note(e, 1, fabs(double(kda::decay_of(x)) - ex) / ex, 3.0 + 1.2 * ax, u);
    const double sg = 1.0 / (1.0 + exp(-double(x)));
    note(e, 2, fabs(double(kda::sigmoidf_(x)) - sg) / sg, 4.0 + 1.2 * ax, u);
    note(e, 5, fabs(double(kda::sigmoidf_<true>(x)) - sg) / sg, 5.0 + 1.2 * ax, u);
    if (fabsf(x) >= 1e-30f) {
      const double si = double(x) * sg;
      note(e, 3, fabs(double(kda::silu(x)) - si) / fabs(si), 5.0 + 1.2 * ax, u);
      note(e, 6, fabs(double(kda::silu<true>(x)) - si) / fabs(si), 6.0 + 1.2 * ax, u);
    }
    if (x >= 1e-6f) {
      const double is = 1.0 / sqrt(double(x));
      note(e, 4, fabs(double(kda::inv_sqrt_(x)) - is) / is, 3.0, u);
    }
  }
}

TEST(CudaNumerics, SpecialFunctionsWithinTheirBounds) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  SfuErr* e = nullptr;
  ASSERT_EQ(cudaMalloc(&e, sizeof *e), cudaSuccess);
  ASSERT_EQ(cudaMemset(e->worst, 0, sizeof e->worst), cudaSuccess);
  ASSERT_EQ(cudaMemset(e->first_bad, 0xff, sizeof e->first_bad), cudaSuccess);
  sfu_forms<<<4096, 256>>>(uint64_t(1) << 32, e);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  SfuErr h{};
  ASSERT_EQ(cudaMemcpy(&h, e, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(e);
  const char* names[7] = {"exp_", "decay_of", "sigmoidf_", "silu", "inv_sqrt_", "sigmoidf_<approx>", "silu<approx>"};
  for (int f = 0; f < 7; ++f) {
    const float worst = kda::bits_float(h.worst[f]);
    EXPECT_LE(worst, 1.0f) << names[f] << ": worst error " << worst << " × its bound, first input over it 0x"
                           << std::hex << h.first_bad[f];
    EXPECT_GT(worst, 0.0f) << names[f] << " never evaluated";  // the sweep ran
  }
}

}  // namespace
