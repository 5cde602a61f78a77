// kda/cuda/commit_kernel.cuh — commit / flush (SPEC §4): fold the first n records of a row
// into the request's checkpoint, S = S·e_t; S = fmaf(u_t, k_t, S), the same operations as
// the step kernel's decay and update, so commit(n) equals the per-token state bitwise.
//
// Layout: the 128 V rows of an item are independent here (no reduction over V), so an item
// is split over kCommitSplit CTAs of 4 warps; lane l owns K columns [4l, 4l+4).
#pragma once

#include <cuda_runtime.h>

#include "kda/cuda/common.cuh"
#include "kda/cuda/config.h"
#include "kda/request.h"

namespace kda::cuda {

inline constexpr int kCommitSplit = 4;
inline constexpr int kCommitRowsPerWarp = kHeadDim / kCommitSplit / (cuda_config::kCommitThreads / 32);

template <class StateT>
__global__ void __launch_bounds__(cuda_config::kCommitThreads)
    kda_commit_kernel(const __grid_constant__ CommitParams p) {
  using IO = StateIO<StateT>;
  constexpr int K = kHeadDim, RPW = kCommitRowsPerWarp;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t item = blockIdx.x / kCommitSplit;
  const int part = int(blockIdx.x % kCommitSplit);
  const int b = int(item / p.H), h = int(item % p.H);

  const CommitPlan c = resolve_commit(p, b);
  if (c.kind != RequestKind::kRun) {
    if (c.kind == RequestKind::kError && h == 0 && part == 0 && tid == 0)
      raise_error(p.error_flags, p.error_index, c.flags, b);
    return;
  }
  const int row0 = part * (K / kCommitSplit) + warp * RPW;
  if (c.count > 0) {
    StateT* tile = state_tile<StateT>(p.state, p.state_slot_stride, c.slot, h) + row0 * K + lane * 4;
    float4 S[RPW];
#pragma unroll
    for (int i = 0; i < RPW; ++i) S[i] = IO::load(tile + i * K);
    const float* corr = p.correction + c.row * p.correction_row + int64_t(h) * p.Qr * K;
    const float* kg = p.key_gate + c.row * p.key_gate_row + int64_t(h) * p.Qr * 2 * K;
    for (int n = 0; n < c.count; ++n) {
      const float4 k4 = *reinterpret_cast<const float4*>(kg + n * 2 * K + lane * 4);
      const float4 g4 = *reinterpret_cast<const float4*>(kg + n * 2 * K + K + lane * 4);
      const float4 e4 = make_float4(decay_of(g4.x), decay_of(g4.y), decay_of(g4.z), decay_of(g4.w));
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        const float u = corr[n * K + row0 + i];
        S[i].x = fmaf(u, k4.x, S[i].x * e4.x);
        S[i].y = fmaf(u, k4.y, S[i].y * e4.y);
        S[i].z = fmaf(u, k4.z, S[i].z * e4.z);
        S[i].w = fmaf(u, k4.w, S[i].w * e4.w);
      }
    }
#pragma unroll
    for (int i = 0; i < RPW; ++i) IO::store(tile + i * K, S[i]);
  }
  // flush: the last of the H·kCommitSplit CTAs of the request zeroes pending[row].
  if (!p.counts) {
    __syncthreads();
    if (tid == 0 && arrive_last(p.arrivals, c.row, p.H * kCommitSplit)) p.pending[c.row * p.pending_stride] = 0;
  }
}

}  // namespace kda::cuda
