// kda/cuda/stream_kernel.cuh — the per-item body of the WS variant (ws_kernel.cuh): an
// item whose state rows are in registers and whose operands (window as stored, x / f_a /
// out-gate rows, pending records) sit in a shared-memory stage. (It began as the body of a
// persistent cp.async "Stream" variant, removed once the Split/Wide kernel beat it
// everywhere; docs/PERFORMANCE.md.)
#pragma once

#include <cuda_runtime.h>

#include <cuda/pipeline>

#include "kda/cuda/common.cuh"
#include "kda/cuda/config.h"
#include "kda/cuda/item.cuh"
#include "kda/request.h"

namespace kda::cuda {

/// Copies `bytes` (a multiple of 16, both ends 16-byte aligned) with the CTA's threads.
__device__ __forceinline__ void cta_copy16(char* dst, const char* src, int64_t bytes, int tid, int nt,
                                           ::cuda::pipeline<::cuda::thread_scope_thread>& pipe) {
  for (int64_t o = int64_t(tid) * 16; o < bytes; o += int64_t(nt) * 16)
    ::cuda::memcpy_async(dst + o, src + o, ::cuda::aligned_size_t<16>(16), pipe);
}

/// The per-item body shared by the Stream and WS kernels: `compute` runs one item whose
/// state is in registers and whose operands sit in a shared-memory stage (layout
/// cuda_config::StreamSmem offsets from `st`). NT_ threads take part; BAR_ names the barrier
/// they synchronise on (0: __syncthreads, the whole CTA; else a named barrier of NT_ threads,
/// so that the WS producer warp does not take part).
template <class StateT, int NT_ = cuda_config::kStreamThreads, int BAR_ = 0>
struct StreamKernel {
  using IO = StateIO<StateT>;
  static constexpr int NT = NT_, NW = NT / 32, RPW = kHeadDim / NW, K = kHeadDim;
  static constexpr int G = 32 / RPW;
  static constexpr int kGateTpr = NT / K, kGateChunk = kRank / kGateTpr, kGateNV = kGateChunk / 8;

  const StepParams& p;
  const cuda_config::StreamSmem L;
  char* smem;
  float* sc;  ///< scratch: yq, yk, yv, g, o [q][128], beta, inv, red
  int tid, lane, warp;

  /// Weights of head h that this thread needs, held in registers across the items of one
  /// head (kHoldWeights: the WS kernel, whose ring leaves L1 little room). Without it
  /// (Stream) compute() reads them from global memory (L1) per item.
  static constexpr bool kHoldWeights = BAR_ != 0;
  /// compute() ends with a barrier (Stream) or not (WS, see the NOTES at its end).
  static constexpr bool kEndBarrier = BAR_ == 0;
  static constexpr int kChan = (3 * kHeadDim + NT - 1) / NT;  ///< conv channels per thread
  struct HeadWeights {
    float cw[kChan][4];
    float cb[kChan];
    float dtb = 0.f, a = 0.f, nw = 0.f;
    uint4 fb[kGateNV];
  };
  __device__ __forceinline__ void load_weights(HeadWeights& w, int h) const {
    const int D = p.H * K;
#pragma unroll
    for (int n = 0; n < kChan; ++n) {
      const int lc = tid + n * NT;
      if (lc < 3 * K) {
        const int sec = lc / K, cc = h * K + lc % K;
#pragma unroll
        for (int k = 0; k < 4; ++k) w.cw[n][k] = p.conv_w[(sec * 4 + k) * D + cc];
        w.cb[n] = p.conv_b ? p.conv_b[int64_t(sec) * D + cc] : 0.f;
      }
    }
    const int i = tid / kGateTpr, part = tid % kGateTpr;
    w.dtb = p.dt_bias[h * K + i];
    w.a = exp_(p.A_log[h]);
    if (p.gate_mode != int(GateMode::kPrecomputed)) {
      const uint4* fb = reinterpret_cast<const uint4*>(p.f_b + int64_t(h * K + i) * p.f_b_row + part * kGateChunk);
#pragma unroll
      for (int j = 0; j < kGateNV; ++j) w.fb[j] = fb[j];
    }
    w.nw = p.norm_w[tid % K];
  }

  __device__ char* stage(int s) const { return smem + L.stage(s); }
  __device__ void sync() const {
    if constexpr (BAR_ == 0)
      __syncthreads();
    else
      asm volatile("bar.sync %0, %1;" ::"n"(BAR_), "n"(NT) : "memory");
  }

  // ---- issue the copies of an item into the state stage and operand stage s -------------
  __device__ void issue(int64_t item, const RequestPlan& r, int s,
                        ::cuda::pipeline<::cuda::thread_scope_thread>& pipe) {
    pipe.producer_acquire();
    if (r.kind == RequestKind::kRun) {
      const int b = int(item % p.B), h = int(item / p.B);
      const int q = p.q, D = p.H * K;
      const int64_t row_base = int64_t(b) * q;
      char* st = stage(s);
      // state
      cta_copy16(smem, reinterpret_cast<const char*>(state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h)),
                 L.state_size(), tid, NT, pipe);
      // window of the head's 384 channels, as stored
      const int ces = p.conv_f32 ? 4 : 2;
      const char* conv = static_cast<const char*>(p.conv);
      if (p.conv_dim_first) {
        for (int sec = 0; sec < 3; ++sec)
          cta_copy16(st + L.win_off() + int64_t(sec) * K * p.window * ces,
                     conv + conv_offset(p, r.win_in, int64_t(sec) * D + h * K, 0) * ces, int64_t(K) * p.window * ces,
                     tid, NT, pipe);
      } else {
        const int per = K * ces / 16;  // 16-byte pieces per (column, section)
        for (int c = tid; c < p.window * 3 * per; c += NT) {
          const int j = c / (3 * per), sec = (c / per) % 3, piece = c % per;
          ::cuda::memcpy_async(st + L.win_off() + (int64_t(j) * 3 * K * ces) + sec * K * ces + piece * 16,
                               conv + conv_offset(p, r.win_in, int64_t(sec) * D + h * K, j) * ces + piece * 16,
                               ::cuda::aligned_size_t<16>(16), pipe);
        }
      }
      // x rows (q | k | v sections of head h), gate inputs, out gate
      for (int c = tid; c < q * 48; c += NT) {  // 48 pieces of 16 B per token: 3 sections × 256 B
        const int t = c / 48, sec = (c / 16) % 3, piece = c % 16;
        ::cuda::memcpy_async(
            st + L.x_off() + (int64_t(t) * 3 * K + sec * K) * 2 + piece * 16,
            reinterpret_cast<const char*>(p.qkv + (row_base + t) * p.qkv_row + int64_t(sec) * D + h * K) + piece * 16,
            ::cuda::aligned_size_t<16>(16), pipe);
      }
      const int64_t gcol = p.gate_mode == int(GateMode::kPrecomputed) ? int64_t(h) * K : 0;
      for (int c = tid; c < q * 32; c += NT) {  // gate_in and out_gate: 16 pieces per token each
        const int t = (c >> 4) % q, piece = c & 15;
        if (c < q * 16)
          ::cuda::memcpy_async(
              st + L.fa_off() + int64_t(t) * K * 2 + piece * 16,
              reinterpret_cast<const char*>(p.gate_in + (row_base + t) * p.gate_in_row + gcol) + piece * 16,
              ::cuda::aligned_size_t<16>(16), pipe);
        else
          ::cuda::memcpy_async(
              st + L.og_off() + int64_t(t) * K * 2 + piece * 16,
              reinterpret_cast<const char*>(p.out_gate + (row_base + t) * p.out_gate_row + int64_t(h) * K) + piece * 16,
              ::cuda::aligned_size_t<16>(16), pipe);
      }
      if (p.mode == int(StepMode::kPerToken) && tid < q)
        ::cuda::memcpy_async(reinterpret_cast<int32_t*>(st + L.slots_off()) + tid,
                             &p.slots[int64_t(b) * p.slots_stride0 + int64_t(tid) * p.slots_stride1],
                             ::cuda::aligned_size_t<4>(4), pipe);
      if (p.mode == int(StepMode::kFused) && r.pending > 0) {
        const char* corr =
            reinterpret_cast<const char*>(p.correction + r.row * p.correction_row + int64_t(h) * p.Qr * K);
        const char* kg = reinterpret_cast<const char*>(p.key_gate + r.row * p.key_gate_row + int64_t(h) * p.Qr * 2 * K);
        cta_copy16(st + L.rec_off(), corr, int64_t(r.pending) * K * 4, tid, NT, pipe);
        cta_copy16(st + L.rec_off() + L.rec_cap() * K * 4, kg, int64_t(r.pending) * 2 * K * 4, tid, NT, pipe);
      }
    }
    pipe.producer_commit();
  }

  // ---- the warp's rows of a [128][128] state tile staged in shared memory -> registers ------
  __device__ void load_state(float4 (&S)[RPW], const char* stage_state) const {
    const StateT* st = reinterpret_cast<const StateT*>(stage_state) + (warp * RPW) * kHeadDim + lane * 4;
#pragma unroll
    for (int i = 0; i < RPW; ++i) {
      if constexpr (sizeof(StateT) == 4) {
        S[i] = *reinterpret_cast<const float4*>(st + i * kHeadDim);
      } else {
        const uint2 u = *reinterpret_cast<const uint2*>(st + i * kHeadDim);
        S[i] = make_float4(bits_float(u.x << 16), bits_float(u.x & 0xffff0000u), bits_float(u.y << 16),
                           bits_float(u.y & 0xffff0000u));
      }
    }
  }

  // ---- compute an item whose copies have landed --------------------------------------------
  __device__ __forceinline__ void compute(int64_t item, const RequestPlan& r, const char* st, float4 (&S)[RPW],
                                          float beta_raw, const HeadWeights& hw) {
    const int b = int(item % p.B), h = int(item / p.B);
    const int q = p.q, H = p.H, D = H * K;
    const StepMode mode = StepMode(p.mode);
    const bool records = mode == StepMode::kRecord || mode == StepMode::kFused;
    const int64_t row_base = int64_t(b) * q;
    float* s_yq = sc;
    float* s_yk = s_yq + q * K;
    float* s_yv = s_yk + q * K;
    float* s_g = s_yv + q * K;
    float* s_o = s_g + q * K;
    float* s_beta = s_o + q * K;
    float* s_inv = s_beta + kMaxQ;

    if (r.kind != RequestKind::kRun) {
      for (int i = tid; i < q * K; i += NT) p.out[(row_base + i / K) * p.out_row + h * K + i % K] = 0;
      if (r.kind == RequestKind::kError && h == 0 && tid == 0) raise_error(p.error_flags, p.error_index, r.flags, b);
      return;
    }
    const int off = r.accepted - 1;
    const uint16_t* sx = reinterpret_cast<const uint16_t*>(st + L.x_off());
    const uint16_t* sfa = reinterpret_cast<const uint16_t*>(st + L.fa_off());
    const uint16_t* sog = reinterpret_cast<const uint16_t*>(st + L.og_off());
    auto win_at = [&](int lc, int col) -> float {
      const int64_t idx = p.conv_dim_first ? int64_t(lc) * p.window + col : int64_t(col) * 3 * K + lc;
      return p.conv_f32 ? reinterpret_cast<const float*>(st + L.win_off())[idx]
                        : bf16_to_f32(reinterpret_cast<const uint16_t*>(st + L.win_off())[idx]);
    };

    // ---- conv + SiLU of the 384 channels; new window columns straight to the cache -------
#pragma unroll
    for (int n = 0; n < kChan; ++n) {
      const int lc = tid + n * NT;
      if (lc >= 3 * K) break;
      const int sec = lc / K, cc = h * K + lc % K;
      const int64_t c = int64_t(sec) * D + cc;
      float* dst = (sec == 0 ? s_yq : sec == 1 ? s_yk : s_yv) + lc % K;
      float w0, w1, w2, w3, bias;
      if constexpr (kHoldWeights) {
        w0 = hw.cw[n][0], w1 = hw.cw[n][1], w2 = hw.cw[n][2], w3 = hw.cw[n][3], bias = hw.cb[n];
      } else {
        w0 = p.conv_w[(sec * 4 + 0) * D + cc], w1 = p.conv_w[(sec * 4 + 1) * D + cc];
        w2 = p.conv_w[(sec * 4 + 2) * D + cc], w3 = p.conv_w[(sec * 4 + 3) * D + cc];
        bias = p.conv_b ? p.conv_b[c] : 0.f;
      }
      float h0 = win_at(lc, off), h1 = win_at(lc, off + 1), h2 = win_at(lc, off + 2);
      // NOTES: the window and output stores round to bf16 in integer arithmetic here, not by
      // cvt as the Split/Wide kernel does: with cvt this kernel (at the 168-register cap) was
      // compiled 272 instructions longer (its sigmoid loops unrolled further, 4 more bytes of
      // spills) and per_token q = 4, which it serves, ran 3% slower at H = 96, B = 64 and 256
      // (docs/data/ladder_s18/run4). Both forms give the same bits for every non-NaN value.
      conv_store<true>(p, r.win_out, c, 0, h1);
      conv_store<true>(p, r.win_out, c, 1, h2);
      for (int t = 0; t < q; ++t) {
        const float x = bf16_to_f32(sx[t * 3 * K + lc]);
        conv_store<true>(p, r.win_out, c, 2 + t, x);
        float a = bias;
        a = fmaf(w0, h0, a);
        a = fmaf(w1, h1, a);
        a = fmaf(w2, h2, a);
        a = fmaf(w3, x, a);
        dst[t * K] = silu(a);
        h0 = h1;
        h1 = h2;
        h2 = x;
      }
    }
    if (tid < q) s_beta[tid] = sigmoidf_(beta_raw);
    sync();

    // ---- q/k l2 norms -------------------------------------------------------------------------
    qk_inv_norms(s_yq, s_yk, s_inv, q, warp, NW, lane);
    // ---- gate: thread pair per row of F_B[h] (read through L1: consecutive items share h) --
    {
      const int i = tid / kGateTpr, part = tid % kGateTpr;
      const float a = kHoldWeights ? hw.a : exp_(p.A_log[h]);
      const float dtb = kHoldWeights ? hw.dtb : p.dt_bias[h * K + i];
      if (p.gate_mode == int(GateMode::kPrecomputed)) {
        if (part == 0)
          for (int t = 0; t < q; ++t)
            s_g[t * K + i] = activate_gate(bf16_to_f32(sfa[t * K + i]) + dtb, a, p.has_lower_bound != 0, p.lower_bound);
      } else {
        // NOTES: F_B is read per token from L1 rather than held in registers (the 64 state
        // registers are live); consecutive items of the CTA share h, so it stays in L1.
        const uint4* fb =
            kHoldWeights ? nullptr
                         : reinterpret_cast<const uint4*>(p.f_b + int64_t(h * K + i) * p.f_b_row + part * kGateChunk);
        for (int t = 0; t < q; ++t) {
          // NOTES: the thread's f_a chunk in 16-byte shared loads (8 instead of 64 2-byte
          // loads per token); the same products in the same order as element-wise reads.
          const uint4* fa4 = reinterpret_cast<const uint4*>(sfa + t * K + part * kGateChunk);
          uint4 fav[kGateNV];
#pragma unroll
          for (int jj = 0; jj < kGateNV; ++jj) fav[jj] = fa4[jj];
          const auto fa = [&fav](int j) {
            const uint4 v = fav[j >> 3];
            const int e = (j >> 1) & 3;
            const uint32_t w = e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
            return bits_float((j & 1) ? (w & 0xffff0000u) : (w << 16));
          };
          float z;
          if constexpr (kHoldWeights)
            z = gate_dot<kGateNV>(hw.fb, fa, 0);
          else
            z = gate_dot<kGateNV>(fb, fa, 0);
          z = group_sum<kGateTpr>(z);
          if (part == 0) s_g[t * K + i] = activate_gate(z + dtb, a, p.has_lower_bound != 0, p.lower_bound);
        }
      }
    }
    // ---- fused: fold the pending records, write the checkpoint ----------------------------
    const int row0 = warp * RPW;
    if (mode == StepMode::kFused && r.pending > 0) {
      const float* corr = reinterpret_cast<const float*>(st + L.rec_off());
      const float* kg = corr + L.rec_cap() * K;
      for (int pp = 0; pp < r.pending; ++pp) {
        const float4 k4 = *reinterpret_cast<const float4*>(kg + pp * 2 * K + lane * 4);
        const float4 g4 = *reinterpret_cast<const float4*>(kg + pp * 2 * K + K + lane * 4);
        fold_record<RPW>(S, corr + pp * K + row0, k4, g4);
      }
      StateT* dst = state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h) + row0 * K + lane * 4;
#pragma unroll
      for (int i = 0; i < RPW; ++i) {
        IO::store(dst + i * K, S[i]);
        S[i] = IO::stored(S[i]);
      }
    }
    sync();
    if (mode == StepMode::kFused && tid == 0 && arrive_last(p.arrivals, r.row, H))
      p.pending[r.row * p.pending_stride] = 0;
    if (records) {
      float* kg = p.key_gate + r.row * p.key_gate_row + int64_t(h) * p.Qr * 2 * K;
      for (int i = tid; i < q * 2 * K; i += NT) {
        const int t = i / (2 * K), c = i % (2 * K);
        kg[t * 2 * K + c] = c < K ? s_yk[t * K + c] * s_inv[kMaxQ + t] : s_g[t * K + c - K];
      }
    }

    // ---- the delta rule, token by token -----------------------------------------------------
    float* corr = records ? p.correction + r.row * p.correction_row + int64_t(h) * p.Qr * K : nullptr;
    const int32_t* tslots = reinterpret_cast<const int32_t*>(st + L.slots_off());
    const bool writer = (lane % G) == 0;
    const int wrow = row0 + lane / G;
    for (int t = 0; t < q; ++t) {
      const TokenVectors tv = token_vectors(s_yq, s_yk, s_g, s_inv, t, lane);
      float u, o;
      delta_token<RPW>(S, tv.k, tv.q, tv.e, s_beta[t], s_yv + t * K + row0, lane, u, o);
      if (writer) {
        s_o[t * K + wrow] = o;
        if (records) corr[t * K + wrow] = u;
      }
      if (mode == StepMode::kPerToken) {
        const int64_t dslot = tslots[t];
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
    sync();
    // ---- gated RMSNorm -------------------------------------------------------------------------
    // NOTES: a warp's threads share the token t of an output element (NT and 32 divide K), so
    // each warp sums t's squares itself, in the order one warp per token used (lanes j, j+32,
    // …, then the butterfly): the same bits without a barrier between the sums and the output.
    static_assert(NT % K == 0 && K % 32 == 0, "a warp's output elements share one token");
    for (int i = tid; i < q * K; i += NT) {
      const int t = i / K, v = i % K;
      float sum = 0.f;
      for (int j = lane; j < K; j += 32) sum = fmaf(s_o[t * K + j], s_o[t * K + j], sum);
      sum = warp_sum(sum);
      const float rn = inv_sqrt_(sum / float(K) + p.eps);
      if (!p.output_norm) {  // SPEC §9: out = bf16(o), the out gate is not staged
        p.out[(row_base + t) * p.out_row + h * K + v] = f32_to_bf16_bits(s_o[i]);
        continue;
      }
      const float gate = sigmoidf_(bf16_to_f32(sog[i]));
      const float nw = kHoldWeights ? hw.nw : p.norm_w[v];  // v = tid % K: NT is a multiple of K
      p.out[(row_base + t) * p.out_row + h * K + v] = f32_to_bf16_bits(s_o[i] * rn * nw * gate);
    }
    // NOTES: the scratch is reused by the next item. Stream ends with a barrier (its plan ring
    // and operand stages are recycled by thread 0 right after). WS does not: after the barrier
    // above, the output only reads s_o and the stage; the next item writes s_o only after two
    // more barriers that every consumer must reach, and each warp releases the stage itself
    // (ws_kernel.cuh: the empty barriers count consumer threads).
    if constexpr (kEndBarrier) sync();
  }
};

}  // namespace kda::cuda
