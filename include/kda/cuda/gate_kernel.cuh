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
// Shape: grid (H, ⌈rows / M⌉) with M = p.gate_tile_rows ∈ {16, 32, 64} step rows per CTA
// (heuristics::gate_tile_rows), kGateThreads threads; warp w computes the head's 32 gate rows
// [32w, 32w + 32) (two accumulator fragments of 16 × 16) for every 16-row strip of the tile that
// holds a step row, K = 128 in 8 steps of 16. F_B[h] is staged in shared memory and the warp's
// B-operand fragments taken into registers before the wait; f_a after it (any alignment of f_a
// within the packed row), padded rows to keep ldmatrix conflict-free. The strips past the last
// step row are skipped; the padding rows of a partial strip are computed from zeros and not stored
// (nothing reads them).
//
// Programmatic dependent launch: F_B (a weight) is staged before the wait, f_a after it; the
// launch of the step kernel that follows is triggered after the wait (not before), so the step
// starts only once the engine's previous grid has completed, and waits for this grid only
// before it reads the logits (step_kernel.cuh, "the late wait").
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include "kda/cuda/common.cuh"
#include "kda/cuda/config.h"

namespace kda::cuda {

__global__ void __launch_bounds__(cuda_config::kGateThreads) kda_gate_kernel(const __grid_constant__ StepParams p) {
  namespace wmma = nvcuda::wmma;
  constexpr int K = kHeadDim, R = kRank, LD = cuda_config::kGateLd;
  constexpr int NT = cuda_config::kGateThreads, NW = NT / 32, NC = K / NW;  // NC gate rows per warp
  static_assert(NC == 32, "two 16-column fragments per warp");
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* s_fb = reinterpret_cast<__nv_bfloat16*>(smem);  // [128 gate rows][LD]
  __nv_bfloat16* s_fa = s_fb + K * LD;                           // [M rows][LD]
  const int tid = threadIdx.x, warp = tid >> 5, h = blockIdx.x, M = p.gate_tile_rows;
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
  __syncthreads();
  // B = F_Bᵀ for the warp's 32 gate rows: element (k, n) at s_fb[n·LD + k], column-major, ld = LD
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> bm[R / 16][2];
#pragma unroll
  for (int k = 0; k < R / 16; ++k)
#pragma unroll
    for (int n = 0; n < 2; ++n) wmma::load_matrix_sync(bm[k][n], s_fb + (warp * NC + n * 16) * LD + k * 16, LD);
  // NOTES: the step kernel is released only once every CTA of this grid has passed its wait,
  // i.e. once the engine's previous grid has completed: the step may then read everything but
  // the logits before its own wait (on this grid), and streams its state while this GEMM runs.
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();

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

  // NOTES: the logits are stored L2 evict-last where they take at most half the L2 (p.gate_ws_keep:
  // heuristics::gate_logits_keep_in_l2; more crowds out the state's own traffic), so that they are still in L2 when
  // the step reads them (it streams its state through L2 meanwhile), and a Wide step drops them once read
  // (drop_gate_logits): 512 bytes an item neither written to DRAM nor read back. Split's ranks all read an item's
  // logits, so none drops them: they stay until the next gate kernel writes the lines again (at most a Split grid's
  // workspace). The strip goes through the warp's piece of s_fb (free: every warp holds its B fragments since the
  // barrier above) in 16-byte pieces; the padding rows past the last step row, never read, are not stored.
  float* stage = reinterpret_cast<float*>(smem) + warp * 16 * NC;
  static_assert(NW * 16 * NC * 4 <= K * LD * 2, "the warps' strips fit in s_fb");
  const uint64_t policy =
      p.gate_ws_keep ? l2_policy(::cuda::access_property::persisting{}) : l2_policy(::cuda::access_property::normal{});
  for (int s = 0; s < M / 16 && row0 + 16 * s < rows; ++s) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    wmma::fill_fragment(acc[0], 0.f);
    wmma::fill_fragment(acc[1], 0.f);
#pragma unroll
    for (int k = 0; k < R / 16; ++k) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
      wmma::load_matrix_sync(a, s_fa + s * 16 * LD + k * 16, LD);
      wmma::mma_sync(acc[0], a, bm[k][0], acc[0]);
      wmma::mma_sync(acc[1], a, bm[k][1], acc[1]);
    }
    // the strip through the warp's piece of s_fb, then to the step rows under that policy (NOTES above)
    __syncwarp();  // (the warp's reads of the previous strip)
    wmma::store_matrix_sync(stage, acc[0], unsigned(NC), wmma::mem_row_major);
    wmma::store_matrix_sync(stage + 16, acc[1], unsigned(NC), wmma::mem_row_major);
    __syncwarp();
    float* dst = p.gate_ws + (row0 + 16 * s) * p.gate_ws_row + int64_t(h) * K + warp * NC;
#pragma unroll
    for (int i = 0; i < 16 * NC / 4 / 32; ++i) {
      const int e = (tid & 31) + 32 * i, r = e / (NC / 4), c = e % (NC / 4);
      if (row0 + 16 * s + r < rows)
        ::cuda::ptx::st_L2_cache_hint(::cuda::ptx::space_global, reinterpret_cast<float4*>(dst + r * p.gate_ws_row) + c,
                                      reinterpret_cast<const float4*>(stage + r * NC)[c], policy);
    }
  }
}

}  // namespace kda::cuda
