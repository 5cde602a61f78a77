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

/// Shared-memory layout of the Split/Wide kernel, in floats, for q tokens:
///   fb[RC][128] bf16 (as RC·64 floats)  the CTA's F_B rows, staged before the PDL wait
///   fa[q][128]  gate inputs      yq[q][128], yk[q][128]  conv outputs
///   yv[q][RC]   own v rows        g[q][128]               activated gates
///   o[q][RC]    pre-norm outputs  og[q][RC]               sigmoid(out_gate)
///   win[256][2+q] new q/k window columns (rank 0 of a cluster writes them after barrier #1)
///   beta[16], inv[2][16], red[16][SPLIT]
struct StepSmem {
  int q, split;
  constexpr int rc() const { return rows_per_cta(split); }
  constexpr int fb() const { return 0; }
  constexpr int fa() const { return fb() + rc() * kRank / 2; }
  constexpr int yq() const { return fa() + q * kHeadDim; }
  constexpr int yk() const { return yq() + q * kHeadDim; }
  constexpr int yv() const { return yk() + q * kHeadDim; }
  constexpr int g() const { return yv() + q * rc(); }
  constexpr int o() const { return g() + q * kHeadDim; }
  constexpr int og() const { return o() + q * rc(); }
  constexpr int win() const { return og() + q * rc(); }
  constexpr int beta() const { return win() + (split > 1 ? 2 * kHeadDim * (2 + q) : 0); }
  constexpr int inv() const { return beta() + kMaxQ; }
  constexpr int red() const { return inv() + 2 * kMaxQ; }
  constexpr int floats() const { return red() + kMaxQ * split; }
  constexpr int64_t bytes() const { return int64_t(floats()) * 4; }
};

/// Stream kernel (persistent, SPLIT = 1, 256 threads): shared memory in bytes.
///   state stage [128][128] (the next item's state, 16-byte async copies)
///   two operand stages: window [384 channels × window] as stored, x [q][384] bf16,
///     f_a [q][128] bf16, out_gate [q][128] bf16, per-token slots [16] i32,
///     records [rec_cap][384] f32 (fused: u then k|g of the pending records)
///   scratch (f32): yq, yk, yv, g, o [q][128], beta[16], inv[32], red[16]
inline constexpr int kStreamThreads = 256;
inline constexpr int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }
struct StreamSmem {
  int q, window, conv_bytes, state_bytes, fused;
  constexpr int64_t state_size() const { return int64_t(kHeadDim) * kHeadDim * state_bytes; }
  constexpr int64_t win_off() const { return 0; }
  constexpr int64_t x_off() const { return round16(int64_t(3) * kHeadDim * window * conv_bytes); }
  constexpr int64_t fa_off() const { return x_off() + int64_t(q) * 3 * kHeadDim * 2; }
  constexpr int64_t og_off() const { return fa_off() + int64_t(q) * kHeadDim * 2; }
  constexpr int64_t slots_off() const { return og_off() + int64_t(q) * kHeadDim * 2; }
  constexpr int64_t rec_off() const { return slots_off() + kMaxQ * 4; }
  /// fused: records staged per item. pending = accepted <= window - W + 2 (W = 4 on CUDA) may
  /// exceed q (a q = 1 step after a q = 4 verify): room for max(q, window - 2) records.
  constexpr int64_t rec_cap() const { return window - 2 > q ? int64_t(window - 2) : int64_t(q); }
  constexpr int64_t stage_size() const { return rec_off() + (fused ? rec_cap() * 3 * kHeadDim * 4 : 0); }
  constexpr int64_t stage(int s) const { return state_size() + s * stage_size(); }
  constexpr int64_t scratch() const { return stage(2); }
  constexpr int64_t scratch_floats() const { return int64_t(5) * q * kHeadDim + kMaxQ + 2 * kMaxQ + kMaxQ; }
  constexpr int64_t bytes() const { return scratch() + scratch_floats() * 4; }
};

/// WS kernel (warp-specialised, persistent, one CTA per SM): kWsConsumers compute threads
/// and one producer warp. Shared memory: a ring of `stages` stages, each
///   state [128][128] as stored | operands (StreamSmem's stage layout) | plan (64 B) | beta[16]
/// filled by bulk copies (TMA) that complete on the stage's mbarrier, then the consumers'
/// scratch (StreamSmem::scratch_floats), then the producer's table (the beta logits and
/// per-token slot ids of the 32 requests it resolved last). The ring takes as many stages
/// as fit, up to 4.
#ifndef KDA_WS_CONSUMERS
#define KDA_WS_CONSUMERS 256
#endif
/// Consumer threads (a power-of-two number of warps, 8 or 16: 16 or 8 V rows per warp).
/// KDA_WS_CONSUMERS overrides it for experiments (the whole build must agree: host plan and
/// kernel); see docs/PERFORMANCE.md for the measured choice.
inline constexpr int kWsConsumers = KDA_WS_CONSUMERS;
static_assert(kWsConsumers == 256 || kWsConsumers == 512, "WS consumers: 8 or 16 warps");
inline constexpr int kWsThreads = kWsConsumers + 32;  // + the producer warp
inline constexpr int kWsMaxStages = 4;
struct WsSmem {
  StreamSmem ops;  ///< operand offsets within a stage (after the state)
  constexpr int64_t state_size() const { return ops.state_size(); }
  constexpr int64_t ops_off() const { return state_size(); }
  constexpr int64_t plan_off() const { return round16(ops_off() + ops.stage_size()); }
  static constexpr int64_t kPlanBytes = 64;  ///< room for a RequestPlan (36 bytes; static_assert in ws_kernel.cuh)
  constexpr int64_t beta_off() const { return plan_off() + kPlanBytes; }
  constexpr int64_t stage_size() const { return (beta_off() + kMaxQ * 4 + 127) / 128 * 128; }
  constexpr int64_t scratch_bytes() const { return ops.scratch_floats() * 4; }
  static constexpr int kBatch = 32;  ///< requests the producer resolves at once (one per lane)
  /// beta f32 [32][16] | slot ids i32 [32][16] | plans [32] (64 B each, RequestPlan ≤ kPlanBytes)
  static constexpr int64_t kTableBytes = int64_t(kBatch) * kMaxQ * 4 * 2 + int64_t(kBatch) * kPlanBytes;
  /// stages that fit into `smem_limit` bytes of dynamic shared memory (0 if fewer than 2)
  constexpr int stages_for(int64_t smem_limit) const {
    int64_t n = (smem_limit - scratch_bytes() - kTableBytes) / stage_size();
    if (n > kWsMaxStages) n = kWsMaxStages;
    return n >= 2 ? int(n) : 0;
  }
  /// offset of the producer table after `stages` stages and the scratch (16-byte aligned)
  constexpr int64_t table_off(int stages) const { return round16(stages * stage_size() + scratch_bytes()); }
  constexpr int64_t bytes(int stages) const { return table_off(stages) + kTableBytes; }
};

/// Commit kernel: rows of one (request, head) split over CTAs of 128 threads.
inline constexpr int kCommitThreads = 128;

}  // namespace kda::cuda_config
