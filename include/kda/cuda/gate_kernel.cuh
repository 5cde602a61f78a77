// kda/cuda/gate_kernel.cuh — gate mode 1 (SPEC §5, "shared"): the raw gate logits of every
// token of a step, z[row, h·128 + i] = F_B[h·128 + i] · f_a[row], as one GEMM on tensor cores
// ahead of the Split/Wide step kernel, which then reads z (fp32) instead of computing it.
//
// NOTES: why a separate kernel. In gate mode 0 every item reads its head's 32 KiB of F_B and
// does 16 k multiply-adds per token on CUDA cores inside the per-item chain; at H = 96,
// B = 256 that is 805 MB of L2 reads per step, and for q ≥ 2 the per-token gate dominates the
// prologue. Here one CTA reads F_B[h] once for up to kGateRowsPerCta rows (a tile of requests ×
// tokens), and the products, exact in fp32 (bf16 × bf16), are summed by the tensor cores: only
// the summation order differs from mode 0 (the CPU backend's tolerance covers it, SPEC §8).
// The step kernel then reads 512 bytes of fp32 logits per token and item.
//
// Shape: grid (H, ⌈rows / kGateRowsPerCta⌉), kGateThreads threads; warp w computes the 16 rows
// [16w, 16w + 16) of the CTA's tile against the head's 128 gate rows (8 accumulator
// fragments of 16 × 16), K = 128 in 8 steps of 16. Both operands are staged in shared memory
// (any alignment of f_a within the packed row), padded rows to keep ldmatrix conflict-free.
// The workspace has ⌈rows / kGateRowsPerCta⌉ · kGateRowsPerCta rows, so a strip's stores need
// no bounds; a strip of padding rows only is skipped, the padding rows of a partial strip get
// zeros and are never read.
//
// Programmatic dependent launch: F_B (a weight) is staged before the wait, f_a after it; the
// step kernel that follows waits for this grid before reading the logits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "kda/cuda/common.cuh"
#include "kda/cuda/config.h"

namespace kda::cuda {

__global__ void __launch_bounds__(cuda_config::kGateThreads) kda_gate_kernel(const __grid_constant__ StepParams p) {
  namespace wmma = nvcuda::wmma;
  constexpr int K = kHeadDim, R = kRank, LD = cuda_config::kGateLd, M = cuda_config::kGateRowsPerCta;
  constexpr int NT = cuda_config::kGateThreads;
  static_assert(M == 16 * (NT / 32), "one 16-row strip per warp");
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* s_fb = reinterpret_cast<__nv_bfloat16*>(smem);  // [128 gate rows][LD]
  __nv_bfloat16* s_fa = s_fb + K * LD;                           // [M rows][LD]
  const int tid = threadIdx.x, warp = tid >> 5, h = blockIdx.x;
  const int64_t row0 = int64_t(blockIdx.y) * M, rows = int64_t(p.B) * p.q;

  // F_B[h]: 128 rows of R bf16, 16-byte pieces where the rows allow it
  const uint16_t* fb = p.f_b + int64_t(h) * K * p.f_b_row;
  const bool fb16 = ((reinterpret_cast<uintptr_t>(fb) | uintptr_t(p.f_b_row) * 2) & 15) == 0;
  if (fb16) {
    for (int i = tid; i < K * (R / 8); i += NT) {
      const int r = i / (R / 8), c = i % (R / 8);
      *reinterpret_cast<uint4*>(s_fb + r * LD + c * 8) = *reinterpret_cast<const uint4*>(fb + r * p.f_b_row + c * 8);
    }
  } else {
    for (int i = tid; i < K * R; i += NT)
      reinterpret_cast<uint16_t*>(s_fb)[(i / R) * LD + i % R] = fb[(i / R) * p.f_b_row + i % R];
  }
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();

  // f_a of the tile's rows (zeros past the last row)
  const bool fa16 = ((reinterpret_cast<uintptr_t>(p.gate_in) | uintptr_t(p.gate_in_row) * 2) & 15) == 0;
  if (fa16) {
    for (int i = tid; i < M * (R / 8); i += NT) {
      const int r = i / (R / 8), c = i % (R / 8);
      uint4 v = make_uint4(0, 0, 0, 0);
      if (row0 + r < rows) v = *reinterpret_cast<const uint4*>(p.gate_in + (row0 + r) * p.gate_in_row + c * 8);
      *reinterpret_cast<uint4*>(s_fa + r * LD + c * 8) = v;
    }
  } else {
    for (int i = tid; i < M * R; i += NT) {
      const int r = i / R, c = i % R;
      reinterpret_cast<uint16_t*>(s_fa)[r * LD + c] = row0 + r < rows ? p.gate_in[(row0 + r) * p.gate_in_row + c] : 0;
    }
  }
  __syncthreads();
  if (row0 + warp * 16 >= rows) return;  // a strip of padding rows only: nothing to write

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[K / 16];
#pragma unroll
  for (int n = 0; n < K / 16; ++n) wmma::fill_fragment(acc[n], 0.f);
#pragma unroll
  for (int k = 0; k < R; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
    wmma::load_matrix_sync(a, s_fa + warp * 16 * LD + k, LD);
#pragma unroll
    for (int n = 0; n < K / 16; ++n) {
      // B = F_Bᵀ: element (k, n) at s_fb[n·LD + k], i.e. column-major with ld = LD
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bm;
      wmma::load_matrix_sync(bm, s_fb + n * 16 * LD + k, LD);
      wmma::mma_sync(acc[n], a, bm, acc[n]);
    }
  }
  float* dst = p.gate_ws + (row0 + warp * 16) * p.gate_ws_row + int64_t(h) * K;
#pragma unroll
  for (int n = 0; n < K / 16; ++n)
    wmma::store_matrix_sync(dst + n * 16, acc[n], unsigned(p.gate_ws_row), wmma::mem_row_major);
}

}  // namespace kda::cuda
