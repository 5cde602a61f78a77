// benchmarks/ladder/state_move.cu — how fast can the [128×128] fp32 state of one (request,
// head) item go through an SM and back? A ladder of pure data-movement kernels (no KDA math:
// each value is scaled by 0.999 so nothing is optimised away), one per way of holding the
// state, to choose the structure of the step kernels by measurement (llm.c dev/cuda style).
//
//   regs/N      one CTA of 256 threads per item, the tile in registers (16 float4 per thread,
//               like Wide), N CTAs per SM (forced with dynamic shared memory)
//   tma/N       one CTA per item; one thread bulk-copies the tile into shared memory (TMA,
//               mbarrier complete_tx), threads read it back and store with STG; N CTAs per SM
//   ring/C×S    persistent: C CTAs per SM, a ring of S half-item stages (32 KiB) refilled by
//               bulk copies S−1 tiles ahead; threads read a stage, store with STG
//
// Every kernel updates the same pool in place (items·64 KiB ≫ 5× L2) and reports µs per
// pass, GB/s (read + write) and % of the device-to-device copy ceiling measured in the same
// run. Build: nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a state_move.cu (or the
// CMake target state_move: cmake -DKDA_BUILD_BENCHMARKS=ON, ninja state_move)
// Run: ./state_move [items (default 24576 = H 96 × B 256)]
#include <cuda_runtime.h>
#include <cuda/ptx>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../bench_cuda.h"

namespace ptx = cuda::ptx;
constexpr int kTile = 128 * 128;  // floats per item
constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) regs_kernel(float* pool) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float4* t = reinterpret_cast<float4*>(pool + int64_t(blockIdx.x) * kTile) + warp * 16 * 32 + lane;
  float4 s[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) s[i] = t[i * 32];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    s[i].x *= 0.999f;
    s[i].y *= 0.999f;
    s[i].z *= 0.999f;
    s[i].w *= 0.999f;
    t[i * 32] = s[i];
  }
}

__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  while (!ptx::mbarrier_try_wait_parity(bar, parity)) {}
}

__global__ void __launch_bounds__(kThreads) tma_kernel(float* pool) {
  extern __shared__ __align__(128) float4 sm[];
  __shared__ uint64_t bar;
  float* src = pool + int64_t(blockIdx.x) * kTile;
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &bar, kTile * 4);
    for (int c = 0; c < 4; ++c)
      ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, reinterpret_cast<char*>(sm) + c * 16384,
                         reinterpret_cast<char*>(src) + c * 16384, 16384u, &bar);
  }
  wait_parity(&bar, 0);
  float4* dst = reinterpret_cast<float4*>(src);
#pragma unroll 4
  for (int i = threadIdx.x; i < kTile / 4; i += kThreads) {
    float4 v = sm[i];
    v.x *= 0.999f;
    v.y *= 0.999f;
    v.z *= 0.999f;
    v.w *= 0.999f;
    dst[i] = v;
  }
}

constexpr int kHalf = kTile / 2;  // floats per ring stage (64 rows)
__global__ void __launch_bounds__(kThreads) ring_kernel(float* pool, int tiles, int stages) {
  extern __shared__ __align__(128) float4 sm[];
  __shared__ uint64_t full[8];
  const int G = gridDim.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) ptx::mbarrier_init(&full[s], 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  auto issue = [&](int j) {  // j-th tile of this CTA into stage j % stages
    const int tile = blockIdx.x + j * G;
    if (tile >= tiles) return;
    const int s = j % stages;
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[s], kHalf * 4);
    for (int c = 0; c < 2; ++c)
      ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, reinterpret_cast<char*>(sm + s * kHalf / 4) + c * 16384,
                         reinterpret_cast<char*>(pool + int64_t(tile) * kHalf) + c * 16384, 16384u, &full[s]);
  };
  if (threadIdx.x == 0)
    for (int j = 0; j < stages - 1; ++j) issue(j);
  for (int j = 0;; ++j) {
    const int tile = blockIdx.x + j * G;
    if (tile >= tiles) break;
    if (threadIdx.x == 0) issue(j + stages - 1);  // the stage consumed at j − 1 (synced below)
    const int s = j % stages;
    wait_parity(&full[s], (j / stages) & 1);
    const float4* st = sm + s * kHalf / 4;
    float4* dst = reinterpret_cast<float4*>(pool + int64_t(tile) * kHalf);
#pragma unroll 4
    for (int i = threadIdx.x; i < kHalf / 4; i += kThreads) {
      float4 v = st[i];
      v.x *= 0.999f;
      v.y *= 0.999f;
      v.z *= 0.999f;
      v.w *= 0.999f;
      dst[i] = v;
    }
    __syncthreads();  // stage s free again
  }
}

int main(int argc, char** argv) {
  const int items = argc > 1 ? std::atoi(argv[1]) : 24576;
  const size_t bytes = size_t(items) * kTile * 4;
  float* pool;
  CK(cudaMalloc(&pool, bytes));
  CK(cudaMemset(pool, 0, bytes));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const double ceil = copy_ceiling();
  std::printf("# %s: copy ceiling %.0f GB/s; %d items (%.2f GB pool)\n", prop.name, ceil / 1e9, items, bytes / 1e9);
  std::printf("%-12s %10s %8s %7s\n", "kernel", "us", "GB/s", "%ceil");
  auto report = [&](const char* name, float ms) {
    const double gbs = 2.0 * bytes / (ms * 1e-3);
    std::printf("%-12s %10.1f %8.0f %6.1f%%\n", name, ms * 1e3, gbs / 1e9, 100 * gbs / ceil);
  };
  const int max_smem = int(prop.sharedMemPerMultiprocessor) - 2048;
  CK(cudaFuncSetAttribute(regs_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  CK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  CK(cudaFuncSetAttribute(ring_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
  char name[32];
  for (int n : {1, 2, 3, 4, 6, 8}) {
    const int smem = std::min(max_smem, max_smem / n - 1024);
    std::snprintf(name, sizeof name, "regs/%d", n);
    report(name, median_ms([&] { regs_kernel<<<items, kThreads, smem>>>(pool); }));
  }
  for (int n : {1, 2, 3}) {
    const int smem = std::max(kTile * 4, max_smem / n - 1024);
    std::snprintf(name, sizeof name, "tma/%d", n);
    report(name, median_ms([&] { tma_kernel<<<items, kThreads, smem>>>(pool); }));
  }
  for (int c : {1, 2, 3}) {
    for (int s : {2, 3, 4, 6}) {
      const int smem = s * kHalf * 4;
      if (smem * c > max_smem - (c - 1) * 1024) continue;
      std::snprintf(name, sizeof name, "ring/%dx%d", c, s);
      report(name, median_ms([&] { ring_kernel<<<sms * c, kThreads, smem>>>(pool, items * 2, s); }));
    }
  }
  return 0;
}
