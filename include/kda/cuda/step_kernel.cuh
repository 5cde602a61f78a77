// kda/cuda/step_kernel.cuh — the Split / Wide step kernel: every step kind of SPEC §4
// (decode, per_token, record, fused) for one (request, head) item per cluster of SPLIT CTAs.
// SPLIT = 1 is the Wide variant (one CTA per item); SPLIT ∈ {2, 4, 8} is the Split variant
// (the item's 128 V rows over a thread-block cluster, for small batches).
//
// Work of one item (SPEC §3), q tokens:
//   conv + SiLU of the 384 channels of head h · q/k l2 norm · gate z = F_B[h]·f_a (+dt_bias)
//   · beta · then per token: decay, u = β(v − S·k), S += u kᵀ, o = S·q · gated RMSNorm.
//
// Thread layout: warp w owns V rows [rank·RC + w·RPW, … + RPW); lane l owns K columns
// [4l, 4l+4) of each of them (one float4 per row in registers: the state never leaves the
// registers during the step). Row dot products: rows_reduce (item.cuh).
//
// Cluster cooperation (SPLIT > 1), through distributed shared memory:
//   - the gate: each CTA computes 128/SPLIT of the 128 gate values and writes them into
//     every CTA's shared memory;
//   - the RMSNorm: each CTA writes its partial Σo² per token into every CTA;
//   - record k/g rows and the q/k window columns are written by rank 0 only; u rows and v
//     window columns by their owner.
// Barriers: #0 (arrive at entry, wait before the first remote write: every CTA has
// started); #1 after the gate exchange and every read of shared cache entries (old records,
// pending, q/k window columns); #2 after the Σo² exchange. No remote shared-memory access
// follows #2, so CTAs may exit independently.
//
// Programmatic dependent launch: the CTA's F_B rows (a weight) are staged into shared
// memory before cudaGridDependencySynchronize(); nothing else is read before it.
#pragma once

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cuda/pipeline>
#include <cuda/ptx>

#include "kda/cuda/common.cuh"
#include "kda/cuda/config.h"
#include "kda/cuda/item.cuh"
#include "kda/request.h"

namespace kda::cuda {

namespace cg = cooperative_groups;

template <int SPLIT_, class StateT_>
struct StepTraits {
  static constexpr int kSplit = SPLIT_;
  using StateT = StateT_;
  static constexpr int kWarps = cuda_config::warps_for_split(kSplit);
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kRows = cuda_config::rows_per_cta(kSplit);  // RC
  static constexpr int kRowsPerWarp = kRows / kWarps;              // RPW
  static constexpr int kGateTpr = kThreads / kRows;                // threads per gate row
  static constexpr int kGateChunk = kRank / kGateTpr;              // R values per thread
  static_assert(kRowsPerWarp >= 1 && kRowsPerWarp <= 32, "rows per warp");
  static_assert(kGateTpr >= 1 && kGateTpr <= 32 && kGateChunk % 8 == 0, "gate layout");
};

/// Stores `v` into shared-memory array `local` at index i of every CTA of the cluster.
template <int SPLIT>
__device__ __forceinline__ void store_all_ranks(float* local, int i, float v) {
  if constexpr (SPLIT == 1) {
    local[i] = v;
  } else {
    cg::cluster_group cluster = cg::this_cluster();
#pragma unroll
    for (int r = 0; r < SPLIT; ++r) cluster.map_shared_rank(local, r)[i] = v;
  }
}

template <int SPLIT>
__device__ __forceinline__ void cluster_barrier() {
  if constexpr (SPLIT == 1) __syncthreads();
  else cg::this_cluster().sync();
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 2) kda_step_kernel(const __grid_constant__ StepParams p) {
  using StateT = typename T::StateT;
  using IO = StateIO<StateT>;
  constexpr int SPLIT = T::kSplit, RC = T::kRows, RPW = T::kRowsPerWarp, NT = T::kThreads;
  constexpr int K = kHeadDim, G = 32 / RPW;

  // ---- shared memory ------------------------------------------------------------------
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const cuda_config::StepSmem L{p.q, SPLIT};
  uint16_t* s_fb = reinterpret_cast<uint16_t*>(smem + L.fb());
  float* s_fa = smem + L.fa();
  float* s_yq = smem + L.yq();
  float* s_yk = smem + L.yk();
  float* s_yv = smem + L.yv();
  float* s_g = smem + L.g();
  float* s_o = smem + L.o();
  float* s_og = smem + L.og();
  float* s_win = smem + L.win();
  float* s_beta = smem + L.beta();
  float* s_inv = smem + L.inv();  // [0, 16): 1/|y_q|, [16, 32): 1/|y_k|
  float* s_red = smem + L.red();  // [t][rank]: partial Σo²

  // ---- the item ---------------------------------------------------------------------------
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rank = SPLIT == 1 ? 0 : int(blockIdx.x % SPLIT);
  const int64_t item = blockIdx.x / SPLIT;
  const int b = int(item / p.H), h = int(item % p.H);
  const int q = p.q, H = p.H, D = H * K;
  const StepMode mode = StepMode(p.mode);
  const bool records = mode == StepMode::kRecord || mode == StepMode::kFused;
  const bool gate_from_fb = p.gate_mode != int(GateMode::kPrecomputed);
  const int64_t row_base = int64_t(b) * q;  // first input/output row of the request

  // ---- before the PDL wait: only weights (this CTA's F_B rows) -------------------------
  cudaTriggerProgrammaticLaunchCompletion();
  auto pipe = ::cuda::make_pipeline();
  if (gate_from_fb) {
    pipe.producer_acquire();
    const char* src = reinterpret_cast<const char*>(p.f_b + int64_t(h * K + rank * RC) * p.f_b_row);
    char* dst = reinterpret_cast<char*>(s_fb);
    for (int c = tid; c < RC * (kRank * 2 / 16); c += NT) {
      const int r = c / (kRank * 2 / 16), j = c % (kRank * 2 / 16);
      ::cuda::memcpy_async(dst + r * kRank * 2 + j * 16, src + r * p.f_b_row * 2 + j * 16, ::cuda::aligned_size_t<16>(16), pipe);
    }
    pipe.producer_commit();
  }
  cudaGridDependencySynchronize();

  const RequestPlan r = resolve_request(p, b);
  if (r.kind != RequestKind::kRun) {
    // Pad or caller error: zero output rows, nothing else is read or written.
    for (int i = tid; i < q * RC; i += NT) {
      const int t = i / RC, j = i % RC;
      p.out[(row_base + t) * p.out_row + h * K + rank * RC + j] = 0;
    }
    if (r.kind == RequestKind::kError && h == 0 && rank == 0 && tid == 0)
      raise_error(p.error_flags, p.error_index, r.flags, b);
    if (gate_from_fb) pipe.consumer_wait();  // no copy may outlive the CTA
    return;
  }
  const int off = r.accepted - 1;
  // NOTES: a CTA may write into another CTA's shared memory only once that CTA has started;
  // arrive now (relaxed), wait just before the first remote write (the gate exchange), so
  // the state loads and the conv overlap the barrier.
  if constexpr (SPLIT > 1) ::cuda::ptx::barrier_cluster_arrive(::cuda::ptx::sem_relaxed);

  // ---- state in: issue the loads first, they overlap the conv and the gate ----------------
  const int row0 = rank * RC + warp * RPW;  // first V row of this warp
  float4 S[RPW];
  {
    const StateT* src = state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h) + row0 * K + lane * 4;
#pragma unroll
    for (int i = 0; i < RPW; ++i) S[i] = IO::load(src + i * K);
  }

  // ---- conv + SiLU: q and k channels of head h (all 128), v channels of the own rows;
  //      the new window columns of the channel are written as soon as they are read ---------
  for (int lc = tid; lc < 2 * K + RC; lc += NT) {
    int sec, cc;  // section (0 q, 1 k, 2 v) and channel within the section
    float* dst;
    int dstride;
    if (lc < K) { sec = 0; cc = h * K + lc; dst = s_yq + lc; dstride = K; }
    else if (lc < 2 * K) { sec = 1; cc = h * K + lc - K; dst = s_yk + lc - K; dstride = K; }
    else { sec = 2; cc = h * K + rank * RC + lc - 2 * K; dst = s_yv + lc - 2 * K; dstride = RC; }
    const int64_t c = int64_t(sec) * D + cc;
    const float w0 = p.conv_w[(sec * 4 + 0) * D + cc], w1 = p.conv_w[(sec * 4 + 1) * D + cc];
    const float w2 = p.conv_w[(sec * 4 + 2) * D + cc], w3 = p.conv_w[(sec * 4 + 3) * D + cc];
    const float bias = p.conv_b ? p.conv_b[c] : 0.f;
    float h0 = conv_load(p, r.win_in, c, off), h1 = conv_load(p, r.win_in, c, off + 1);
    float h2 = conv_load(p, r.win_in, c, off + 2);
    // New window of the channel, written as soon as its old columns are read: columns 0, 1
    // = old[off+1], old[off+2]; column 2+t = x_t. Rank 0 of a cluster stages the q/k
    // columns (every rank reads them) and writes them after barrier #1.
    const bool own_window = SPLIT == 1 || sec == 2;
    float* stage = s_win + lc * (2 + q);
    if (own_window) {
      conv_store(p, r.win_out, c, 0, h1);
      conv_store(p, r.win_out, c, 1, h2);
    } else if (rank == 0) {
      stage[0] = h1;
      stage[1] = h2;
    }
    for (int t = 0; t < q; ++t) {
      const float x = ld_bf16(p.qkv + (row_base + t) * p.qkv_row + c);
      if (own_window) conv_store(p, r.win_out, c, 2 + t, x);
      else if (rank == 0) stage[2 + t] = x;
      float a = bias;
      a = fmaf(w0, h0, a);
      a = fmaf(w1, h1, a);
      a = fmaf(w2, h2, a);
      a = fmaf(w3, x, a);
      dst[t * dstride] = silu(a);
      h0 = h1;
      h1 = h2;
      h2 = x;
    }
  }
  // ---- gate inputs, out gate, beta ---------------------------------------------------------
  if (gate_from_fb)
    for (int i = tid; i < q * kRank; i += NT)
      s_fa[i] = ld_bf16(p.gate_in + (row_base + i / kRank) * p.gate_in_row + i % kRank);
  for (int i = tid; i < q * RC; i += NT)
    s_og[i] = sigmoidf_(ld_bf16(p.out_gate + (row_base + i / RC) * p.out_gate_row + h * K + rank * RC + i % RC));
  if (tid < q) s_beta[tid] = sigmoidf_(ld_bf16(p.beta + (row_base + tid) * p.beta_row + h));
  if (gate_from_fb) pipe.consumer_wait();
  __syncthreads();

  // ---- q/k l2 norms: one warp per (token, q|k) -------------------------------------------
  qk_inv_norms(s_yq, s_yk, s_inv, q, warp, T::kWarps, lane);

  // ---- gate: rows [rank·RC, rank·RC + RC) of z, then g into every CTA of the cluster ------
  if constexpr (SPLIT > 1) ::cuda::ptx::barrier_cluster_wait();
  {
    const int il = tid / T::kGateTpr, part = tid % T::kGateTpr;
    const int i = rank * RC + il;  // gate index within the head
    const float a = expf(p.A_log[h]);
    const float dtb = p.dt_bias[h * K + i];
    if (!gate_from_fb) {
      if (part == 0)
        for (int t = 0; t < q; ++t) {
          const float z = ld_bf16(p.gate_in + (row_base + t) * p.gate_in_row + h * K + i) + dtb;
          store_all_ranks<SPLIT>(s_g, t * K + i, activate_gate(z, a, p.has_lower_bound != 0, p.lower_bound));
        }
    } else {
      constexpr int CH = T::kGateChunk, NV = CH / 8;
      const uint4* fb = reinterpret_cast<const uint4*>(s_fb + il * kRank + part * CH);
      for (int t = 0; t < q; ++t) {
        const float* fa = s_fa + t * kRank + part * CH;
        float z = gate_dot<NV>(fb, [fa](int j) { return fa[j]; }, tid & (NV - 1));
        z = group_sum<T::kGateTpr>(z);
        if (part == 0)
          store_all_ranks<SPLIT>(s_g, t * K + i, activate_gate(z + dtb, a, p.has_lower_bound != 0, p.lower_bound));
      }
    }
  }

  // ---- fused: fold the pending records into the checkpoint, write it back ----------------
  if (mode == StepMode::kFused && r.pending > 0) {
    const float* corr = p.correction + r.row * p.correction_row + int64_t(h) * p.Qr * K;
    const float* kg = p.key_gate + r.row * p.key_gate_row + int64_t(h) * p.Qr * 2 * K;
    for (int pp = 0; pp < r.pending; ++pp) {
      const float4 k4 = *reinterpret_cast<const float4*>(kg + pp * 2 * K + lane * 4);
      const float4 g4 = *reinterpret_cast<const float4*>(kg + pp * 2 * K + K + lane * 4);
      fold_record<RPW>(S, corr + pp * K + row0, k4, g4);
    }
    StateT* dst = state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h) + row0 * K + lane * 4;
#pragma unroll
    for (int i = 0; i < RPW; ++i) {
      IO::store(dst + i * K, S[i]);
      S[i] = IO::stored(S[i]);  // continue from what was stored (SPEC §9)
    }
  }

  // ---- barrier #1: gates complete everywhere; shared cache entries all read --------------
  cluster_barrier<SPLIT>();
  if (mode == StepMode::kFused && rank == 0 && tid == 0 && arrive_last(p.arrivals, r.row, H))
    p.pending[r.row * p.pending_stride] = 0;

  if (rank == 0) {
    // records k_t, g_t
    if (records) {
      float* kg = p.key_gate + r.row * p.key_gate_row + int64_t(h) * p.Qr * 2 * K;
      for (int i = tid; i < q * 2 * K; i += NT) {
        const int t = i / (2 * K), c = i % (2 * K);
        kg[t * 2 * K + c] = c < K ? s_yk[t * K + c] * s_inv[kMaxQ + t] : s_g[t * K + c - K];
      }
    }
    // the q/k window columns staged by rank 0 (SPLIT > 1)
    if constexpr (SPLIT > 1)
      for (int i = tid; i < 2 * K * (2 + q); i += NT) {
        const int lc = i / (2 + q), j = i % (2 + q);
        const int64_t c = int64_t(lc / K) * D + h * K + lc % K;
        conv_store(p, r.win_out, c, j, s_win[i]);
      }
  }

  // ---- the delta rule, token by token -----------------------------------------------------
  float* corr = records ? p.correction + r.row * p.correction_row + int64_t(h) * p.Qr * K : nullptr;
  const bool writer = (lane % G) == 0;
  const int wrow = warp * RPW + lane / G;  // the row this lane writes (within the CTA)
  for (int t = 0; t < q; ++t) {
    const TokenVectors tv = token_vectors(s_yq, s_yk, s_g, s_inv, t, lane);
    float u, o;
    delta_token<RPW>(S, tv.k, tv.q, tv.e, s_beta[t], s_yv + t * RC + warp * RPW, lane, u, o);
    if (writer) {
      s_o[t * RC + wrow] = o;
      if (records) corr[t * K + rank * RC + wrow] = u;
    }
    if (mode == StepMode::kPerToken) {
      const int64_t dslot = slot_at(p, b, t);
      if (!is_pad_id(dslot, p.null_slot)) {
        StateT* dst = state_tile<StateT>(p.state, p.state_slot_stride, dslot, h) + row0 * K + lane * 4;
        store_tile<StateT, RPW>(dst, S);
      }
    }
  }
  if (mode == StepMode::kDecode) {
    StateT* dst = state_tile<StateT>(p.state, p.state_slot_stride, r.state_out, h) + row0 * K + lane * 4;
    store_tile<StateT, RPW>(dst, S);
  }

  // ---- Σo² per token over the CTA's rows, into every CTA; barrier #2 ----------------------
  __syncthreads();
  for (int t = warp; t < q; t += T::kWarps) {
    float s = 0.f;
    for (int j = lane; j < RC; j += 32) s = fmaf(s_o[t * RC + j], s_o[t * RC + j], s);
    s = warp_sum(s);
    if (lane == 0) store_all_ranks<SPLIT>(s_red, t * SPLIT + rank, s);
  }
  cluster_barrier<SPLIT>();

  // ---- gated RMSNorm -> bf16 out -------------------------------------------------------------
  for (int i = tid; i < q * RC; i += NT) {
    const int t = i / RC, j = i % RC, v = rank * RC + j;
    float ss = 0.f;
#pragma unroll
    for (int rr = 0; rr < SPLIT; ++rr) ss += s_red[t * SPLIT + rr];
    const float rn = 1.0f / sqrtf(ss / float(K) + p.eps);
    p.out[(row_base + t) * p.out_row + h * K + v] = f32_to_bf16(s_o[t * RC + j] * rn * p.norm_w[v] * s_og[i]);
  }
}

}  // namespace kda::cuda
