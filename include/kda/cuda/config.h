// kda/cuda/config.h — launch configuration of the CUDA step kernels that the host planner
// needs (threads, shared memory), kept free of CUDA so that plan_step is testable on the CPU.
#pragma once

#include <cstdint>

#include "kda/types.h"

namespace kda::cuda_config {

/// Split / Wide kernel (one kernel body, SPLIT CTAs per item as a thread-block cluster;
/// SPLIT = 1 is the Wide variant).
///   rows per CTA  RC = 128 / SPLIT
///   warps         8 for SPLIT = 1 (16 rows per warp), else 4
inline constexpr int warps_for_split(int split) { return split == 1 ? 8 : 4; }
inline constexpr int threads_for_split(int split) { return 32 * warps_for_split(split); }
inline constexpr int rows_per_cta(int split) { return kHeadDim / split; }

/// Shared-memory layout of the step kernel, in floats, for q tokens:
///   fa[q][128]  gate inputs      yq[q][128], yk[q][128]  conv outputs
///   yv[q][RC]   own v rows        g[q][128]               activated gates
///   o[q][RC]    pre-norm outputs  beta[16], inv[2][16], red[16][SPLIT]
struct StepSmem {
  int q, split;
  constexpr int rc() const { return rows_per_cta(split); }
  constexpr int fa() const { return 0; }
  constexpr int yq() const { return fa() + q * kHeadDim; }
  constexpr int yk() const { return yq() + q * kHeadDim; }
  constexpr int yv() const { return yk() + q * kHeadDim; }
  constexpr int g() const { return yv() + q * rc(); }
  constexpr int o() const { return g() + q * kHeadDim; }
  constexpr int beta() const { return o() + q * rc(); }
  constexpr int inv() const { return beta() + kMaxQ; }
  constexpr int red() const { return inv() + 2 * kMaxQ; }
  constexpr int floats() const { return red() + kMaxQ * split; }
  constexpr int64_t bytes() const { return int64_t(floats()) * 4; }
};

/// Commit kernel: rows of one (request, head) split over CTAs of 128 threads.
inline constexpr int kCommitThreads = 128;

}  // namespace kda::cuda_config
