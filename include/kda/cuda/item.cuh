// kda/cuda/item.cuh — building blocks of the per-item work (SPEC §3) shared by every step
// kernel: the row all-reduce of a warp's state tile, one delta-rule token on that tile, the
// decay/records fold, and the gate GEMV row.
//
// Register tile convention: a warp owns N = RPW consecutive V rows; lane l owns K columns
// [4l, 4l+4) of each (S[i] is a float4).
#pragma once

#include <cuda_runtime.h>

#include "kda/cuda/common.cuh"
#include "kda/cuda/config.h"

namespace kda::cuda {

/// One reduce-scatter step of rows_reduce: C live rows, exchanged across lane bit O.
template <int N, int C, int O>
__device__ __forceinline__ void rows_reduce_step(float (&p)[N], int lane) {
  if constexpr (C > 1) {
    const int hi = (lane & O) != 0;
#pragma unroll
    for (int j = 0; j < C / 2; ++j) {
      // NOTES: select values, not addresses: `hi ? p[a] : p[b]` can become a dynamic index
      // and put the array in local memory.
      const float lo = p[j], up = p[j + C / 2];
      float keep, send;
      asm("{\n\t.reg .pred P;\n\tsetp.ne.b32 P, %4, 0;\n\tselp.f32 %0, %2, %3, P;\n\tselp.f32 %1, %3, %2, P;\n\t}"
          : "=f"(keep), "=f"(send)
          : "f"(up), "f"(lo), "r"(hi));
      p[j] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
    rows_reduce_step<N, C / 2, O / 2>(p, lane);
  }
}

/// Sums N per-row partials (one per row of the warp's tile, in every lane) over the 32
/// lanes. Reduce-scatter: at each step a lane keeps half of its rows and adds the partner's
/// half, so N rows cost N−1 + log2(32/N) shuffles instead of 5·N. On return lane l holds
/// the total of row l / (32/N). Fixed order: deterministic.
template <int N>
__device__ __forceinline__ float rows_reduce(float (&p)[N], int lane) {
  static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "N must be a power of two <= 32");
  rows_reduce_step<N, N, 16>(p, lane);
  float v = p[0];
#pragma unroll
  for (int o = 16 / N; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The decay of a lane's four columns of one state row: S ← S·e (elementwise, no fused multiply-add).
__device__ __forceinline__ void decay_row(float4& s, const float4& e4) {
  s.x *= e4.x;
  s.y *= e4.y;
  s.z *= e4.z;
  s.w *= e4.w;
}

/// One token of the delta rule on a warp tile (SPEC §3):
///   S ← S·e;  u = β (v − S k);  S ← fmaf(u, k, S);  o = S q
/// v_rows: the warp's RPW v values (shared memory). On return lane l holds u and o of row
/// l / (32/RPW) (the lane with l % (32/RPW) == 0 is the row's writer).
template <int RPW>
__device__ __forceinline__ void delta_token(float4 (&S)[RPW], const float4& k4, const float4& q4, const float4& e4,
                                            float beta, const float* v_rows, int lane, float& u_out, float& o_out) {
  constexpr int G = 32 / RPW;
  float pp[RPW];
#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    decay_row(S[i], e4);
    pp[i] = dot4(S[i], k4);
  }
  const float d = rows_reduce<RPW>(pp, lane);
  const float u = beta * (v_rows[lane / G] - d);
#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    const float ui = __shfl_sync(0xffffffffu, u, i * G);
    S[i].x = fmaf(ui, k4.x, S[i].x);
    S[i].y = fmaf(ui, k4.y, S[i].y);
    S[i].z = fmaf(ui, k4.z, S[i].z);
    S[i].w = fmaf(ui, k4.w, S[i].w);
    pp[i] = dot4(S[i], q4);
  }
  o_out = rows_reduce<RPW>(pp, lane);
  u_out = u;
}

/// The decay of a warp's rows and their dot products with two token vectors (a q = 1 token):
/// S ← S·e, px[i] = S[i]·x, py[i] = S[i]·y.
template <int RPW>
__device__ __forceinline__ void decay_dots(float4 (&S)[RPW], const float4& e4, const float4& x, const float4& y,
                                           float (&px)[RPW], float (&py)[RPW]) {
#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    decay_row(S[i], e4);
    px[i] = dot4(S[i], x);
    py[i] = dot4(S[i], y);
  }
}

/// The end of a q = 1 token on a warp's rows, from the reduced dot products `tot` (lanes 0–15:
/// a = S·k of their row, lanes 16–31: b = S·q): u = β (v − a), o = b + u·(k·q), and, where the
/// step stores the rows after the token (`update`), S ← fmaf(u, k, S) with k = key() (the lane's
/// four key columns, asked for only then).
template <int RPW, class Key>
__device__ __forceinline__ void delta_rows_finish(float4 (&S)[RPW], float tot, const Key& key, float beta, float kq,
                                                  const float* v_rows, int lane, float& u_out, float& o_out,
                                                  bool update) {
  constexpr int G2 = 16 / RPW;
  const float u = beta * (v_rows[(lane / G2) & (RPW - 1)] - tot);  // meaningful in lanes 0–15
  const float u_hi = __shfl_xor_sync(0xffffffffu, u, 16);          // lane l >= 16: u of its row
  o_out = fmaf(u_hi, kq, tot);                                     // meaningful in lanes 16–31
  u_out = u;
  if (!update) return;  // (the caller drops the updated rows: the step does not store them)
  const float4 k4 = key();
#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    const float ui = __shfl_sync(0xffffffffu, u, i * G2);
    S[i].x = fmaf(ui, k4.x, S[i].x);
    S[i].y = fmaf(ui, k4.y, S[i].y);
    S[i].z = fmaf(ui, k4.z, S[i].z);
    S[i].w = fmaf(ui, k4.w, S[i].w);
  }
}

/// One token of the delta rule on RPW rows of a warp (SPEC §3), the two row dot products
/// reduced together:
///   S ← S·e;  a = S·k, b = S·q (one rows_reduce of 2·RPW partials);  u = β (v − a);
///   S ← fmaf(u, k, S);  o = S·q = b + u·(k·q)
/// v_rows: the warp's RPW v values (shared memory), kq = k·q of the token. On return lanes
/// 0–15 hold u of row lane / (16/RPW), lanes 16–31 o of row (lane − 16) / (16/RPW).
template <int RPW>
__device__ __forceinline__ void delta_rows(float4 (&S)[RPW], const float4& k4, const float4& q4, const float4& e4,
                                           float beta, float kq, const float* v_rows, int lane, float& u_out,
                                           float& o_out, bool update = true) {
  float pk[RPW], pq[RPW], pp[2 * RPW];
  decay_dots<RPW>(S, e4, k4, q4, pk, pq);
#pragma unroll
  for (int i = 0; i < RPW; ++i) pp[i] = pk[i], pp[RPW + i] = pq[i];
  const float tot = rows_reduce<2 * RPW>(pp, lane);
  delta_rows_finish<RPW>(
      S, tot, [&] { return k4; }, beta, kq, v_rows, lane, u_out, o_out, update);
}

/// delta_rows with each lane's first reduction half given by its operands rather than chosen by
/// selects: va is the token vector of the lane's own half (k for lanes 0–15, q for 16–31), vb the
/// other, k_src the lane's four key columns (read for the update only, so that va and vb need not
/// live through it). The level across lane bit 4 then adds the partner's second half to the
/// lane's first: the same two partials in the same order as rows_reduce's first step, so u and o
/// carry the bits of delta_rows. (NOTES: the lean vectors, step_kernel.cuh.)
template <int RPW>
__device__ __forceinline__ void delta_rows_own_half(float4 (&S)[RPW], const float4& va, const float4& vb,
                                                    const float* k_src, const float4& e4, float beta, float kq,
                                                    const float* v_rows, int lane, float& u_out, float& o_out,
                                                    bool update = true) {
  float pa[RPW], pb[RPW];
  decay_dots<RPW>(S, e4, va, vb, pa, pb);
#pragma unroll
  for (int i = 0; i < RPW; ++i) pa[i] += __shfl_xor_sync(0xffffffffu, pb[i], 16);
  rows_reduce_step<RPW, RPW, 8>(pa, lane);
  float tot = pa[0];
#pragma unroll
  for (int o = 8 / RPW; o > 0; o >>= 1) tot += __shfl_xor_sync(0xffffffffu, tot, o);
  delta_rows_finish<RPW>(
      S, tot, [&] { return *reinterpret_cast<const float4*>(k_src); }, beta, kq, v_rows, lane, u_out, o_out, update);
}

constexpr int ilog2(int n) { return n <= 1 ? 0 : 1 + ilog2(n / 2); }

/// Lane roles in a token group of TG tokens on a warp tile of RPW rows. The top
/// NB = 1 + log2(RPW) + log2(TG) bits of the lane id name one dot product of the group:
/// [which (0: a = S·(Γ⊙k), 1: b = S·(Γ⊙q)) | row | token]. A lane holds the tile's rows and
/// the group's tokens in an order permuted by its own bits (row r of the registers is the
/// warp's row r ^ row_bits), so the reduction needs no selects: at every step a lane keeps
/// the first half of its live partials and adds its partner's second half, which is the same
/// logical product.
template <int RPW, int TG>
struct TokenGroupLanes {
  static constexpr int kRowBits = ilog2(RPW), kTokBits = ilog2(TG), kBits = 1 + kRowBits + kTokBits;
  static constexpr int kShift = 5 - kBits;  ///< lanes 2^kShift apart share a product
  static_assert((1 << kRowBits) == RPW && (1 << kTokBits) == TG && kBits <= 5, "token group shape");
  int which, row, tok;
  __device__ __forceinline__ explicit TokenGroupLanes(int lane)
      : which(lane >> 4), row((lane >> (4 - kRowBits)) & (RPW - 1)), tok((lane >> kShift) & (TG - 1)) {}
  /// the lane holding product (which = 0, row, token tt)
  __device__ __forceinline__ static int a_lane(int row, int tt) { return ((row << kTokBits) | tt) << kShift; }
  __device__ __forceinline__ static bool writer(int lane) { return (lane & ((1 << kShift) - 1)) == 0; }
};

/// The row of kgq ([2][qg][128]) where Γ⊙k (hf = 0) or Γ⊙q (hf = 1) of token t is stored for
/// the channels of lane l: permuted by the lane's bits of the token group t belongs to, so that
/// every lane of token_group_dots reads its operands at the same offsets (no per-lane address
/// arithmetic in the row loop). Groups: kTokenGroup tokens from 0, the last one 1, 2 or 3 (held
/// as 4 with a zero pad row).
template <int RPW>
__device__ __forceinline__ int token_group_store_row(int l, int hf, int t, int q, int qg) {
  constexpr int G = cuda_config::kTokenGroup;
  const int t0 = t - t % G, rem = q - t0;
  const int tb = rem >= 3 ? 2 : rem == 2 ? 1 : 0;  // log2 of the group's TG
  const int tok = (l >> (5 - (1 + ilog2(RPW) + tb))) & ((1 << tb) - 1);
  return (hf ^ (l >> 4)) * qg + t0 + ((t - t0) ^ tok);
}

/// The row-permuted tile register of the warp's row `i` (see TokenGroupLanes): row_bits ^ i.
template <int RPW>
__device__ __forceinline__ int tile_row(int lane, int r) {
  return r ^ ((lane >> (4 - ilog2(RPW))) & (RPW - 1));
}

/// Reduce-scatter of C partials over lane offsets O, O/2, … (no selects, see TokenGroupLanes).
template <int C, int O>
__device__ __forceinline__ void group_reduce_step(float* p) {
  if constexpr (C > 1) {
#pragma unroll
    for (int j = 0; j < C / 2; ++j) p[j] += __shfl_xor_sync(0xffffffffu, p[j + C / 2], O);
    group_reduce_step<C / 2, O / 2>(p);
  }
}

/// The 2·RPW·TG dot products of a token group: the tile S (rows permuted, tile_row) against
/// Γ⊙k and Γ⊙q of tokens t0 … t0+TG−1 (kgq: [2][qg][128] as token_group_store_row places
/// them, pad tokens zero). On return every lane holds the total of its product
/// (TokenGroupLanes). Fixed order: deterministic.
template <int RPW, int TG>
__device__ __forceinline__ float token_group_dots(const float4 (&S)[RPW], const float* kgq, int qg, int t0, int lane) {
  using GL = TokenGroupLanes<RPW, TG>;
  const GL gl(lane);
  float kept[RPW * TG];
#pragma unroll
  for (int tp = 0; tp < TG; ++tp) {
    // token t0 + (tp ^ tok), Γ⊙k / Γ⊙q for which = 0 / 1 (va) and the other (vb)
    const float4 va = *reinterpret_cast<const float4*>(kgq + (t0 + tp) * kHeadDim + lane * 4);
    const float4 vb = *reinterpret_cast<const float4*>(kgq + (qg + t0 + tp) * kHeadDim + lane * 4);
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      const float pa = dot4(S[r], va), pb = dot4(S[r], vb);
      kept[r * TG + tp] = pa + __shfl_xor_sync(0xffffffffu, pb, 16);
    }
  }
  group_reduce_step<RPW * TG, 8>(kept);
  float v = kept[0];
#pragma unroll
  for (int o = (1 << GL::kShift) >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// The token recurrence of a group inside each row, from the lanes' products: for j < TG,
///   u_j = β_j (v_j − a_j − Σ_{i<j} u_i M[j][i]),   o_j = b_j + Σ_{i≤j} u_i N[j][i]
/// (M, N: the in-group coefficients, N[j][j] = k_j·q_j). acc: the lane's product in, o out
/// (which = 1 lanes); returns u of the lane's (row, token) (which = 0 lanes).
template <int RPW, int TG>
__device__ __forceinline__ float token_group_solve(float& acc, float v, float beta, const float4& mn, int lane) {
  using GL = TokenGroupLanes<RPW, TG>;
  const GL gl(lane);
  const float cf[4] = {mn.x, mn.y, mn.z, mn.w};
  float my_u = 0.f;
#pragma unroll
  for (int jj = 0; jj < TG; ++jj) {
    const float u = beta * (v - acc);  // final in the lane (0, row, jj) at this step
    const float uj = __shfl_sync(0xffffffffu, u, GL::a_lane(gl.row, jj));
    if (gl.which == 0 && gl.tok == jj) my_u = u;
    if (gl.which ? gl.tok >= jj : gl.tok > jj) acc = fmaf(uj, cf[jj], acc);
  }
  return my_u;
}

/// Folds one record (u_t of the warp's rows, k_t and the decay e_t = exp(g_t) of the lane's
/// columns) into the tile: S = fmaf(u, k, S·e) — the same two roundings as the token update's
/// decay and update (delta_token, delta_rows), so a commit reproduces the per-token state
/// bitwise (SPEC §4). row_xor: tile register i holds the warp's row i ^ row_xor (tile_row).
template <int RPW>
__device__ __forceinline__ void fold_record_e(float4 (&S)[RPW], const float* u_rows, const float4& k4, const float4& e4,
                                              int row_xor = 0) {
#pragma unroll
  for (int i = 0; i < RPW; ++i) {
    const float u = u_rows[i ^ row_xor];
    S[i].x = fmaf(u, k4.x, S[i].x * e4.x);
    S[i].y = fmaf(u, k4.y, S[i].y * e4.y);
    S[i].z = fmaf(u, k4.z, S[i].z * e4.z);
    S[i].w = fmaf(u, k4.w, S[i].w * e4.w);
  }
}

/// fold_record_e from the record's g_t (the WS kernel reads the records as stored).
template <int RPW>
__device__ __forceinline__ void fold_record(float4 (&S)[RPW], const float* u_rows, const float4& k4, const float4& g4) {
  fold_record_e<RPW>(S, u_rows, k4, make_float4(decay_of(g4.x), decay_of(g4.y), decay_of(g4.z), decay_of(g4.w)));
}

/// z + F_B[row, chunk] · f_a[chunk] over 8·NV values: fb the row chunk in registers (bf16
/// pairs), fa the matching f_a values as float4 (shared memory). Fixed order.
template <int NV>
__device__ __forceinline__ float gate_dot_f4(const uint4 (&fb)[NV], const float4* fa, float z = 0.f) {
#pragma unroll
  for (int j = 0; j < NV; ++j) {
    const uint4 v = fb[j];
    const float4 a = fa[2 * j], c = fa[2 * j + 1];
    z = fmaf(bits_float(v.x << 16), a.x, z);
    z = fmaf(bits_float(v.x & 0xffff0000u), a.y, z);
    z = fmaf(bits_float(v.y << 16), a.z, z);
    z = fmaf(bits_float(v.y & 0xffff0000u), a.w, z);
    z = fmaf(bits_float(v.z << 16), c.x, z);
    z = fmaf(bits_float(v.z & 0xffff0000u), c.y, z);
    z = fmaf(bits_float(v.w << 16), c.z, z);
    z = fmaf(bits_float(v.w & 0xffff0000u), c.w, z);
  }
  return z;
}

/// Partial z = F_B[row, chunk] · f_a[chunk] of CH = 8·NV values: `fb` the row chunk (bf16,
/// 16-byte aligned), `fa` the matching f_a values. `rot` rotates the order of the 16-byte
/// pieces (to spread shared-memory banks when fb is in shared memory); the sum order is
/// fixed by (rot, NV), so it is deterministic.
template <int NV, class FA>
__device__ __forceinline__ float gate_dot(const uint4* fb, FA fa, int rot) {
  float z = 0.f;
#pragma unroll
  for (int jj = 0; jj < NV; ++jj) {
    const int j = (jj + rot) & (NV - 1);
    const uint4 v = fb[j];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      z = fmaf(bits_float(w[e] << 16), fa(j * 8 + 2 * e), z);
      z = fmaf(bits_float(w[e] & 0xffff0000u), fa(j * 8 + 2 * e + 1), z);
    }
  }
  return z;
}

/// 1/|y| (with the l2-norm epsilon) of the conv outputs y_q and y_k of every token: one warp
/// per (token, q|k); s_inv[t] for q, s_inv[kMaxQ + t] for k.
__device__ __forceinline__ void qk_inv_norms(const float* s_yq, const float* s_yk, float* s_inv, int q, int warp,
                                             int nwarps, int lane) {
  for (int idx = warp; idx < 2 * q; idx += nwarps) {
    const int t = idx >> 1, which = idx & 1;
    const float* y = (which ? s_yk : s_yq) + t * kHeadDim + lane * 4;
    float s = y[0] * y[0];
    s = fmaf(y[1], y[1], s);
    s = fmaf(y[2], y[2], s);
    s = fmaf(y[3], y[3], s);
    s = warp_sum(s);
    if (lane == 0) s_inv[which * kMaxQ + t] = inv_sqrt_(s + kL2Eps);
  }
}

/// The lane's columns of token t: k (normalised), q (normalised and scaled) and the decay
/// e = exp(g), from the shared-memory conv outputs, gates and inverse norms.
struct TokenVectors {
  float4 k, q, e;
};
__device__ __forceinline__ TokenVectors token_vectors(const float* s_yq, const float* s_yk, const float* s_g,
                                                      const float* s_inv, int t, int lane) {
  const float iq = s_inv[t], ik = s_inv[kMaxQ + t];
  const float4 yk = *reinterpret_cast<const float4*>(s_yk + t * kHeadDim + lane * 4);
  const float4 yq = *reinterpret_cast<const float4*>(s_yq + t * kHeadDim + lane * 4);
  const float4 g4 = *reinterpret_cast<const float4*>(s_g + t * kHeadDim + lane * 4);
  TokenVectors v;
  v.k = make_float4(yk.x * ik, yk.y * ik, yk.z * ik, yk.w * ik);
  v.q = make_float4(yq.x * iq * kQScale, yq.y * iq * kQScale, yq.z * iq * kQScale, yq.w * iq * kQScale);
  v.e = make_float4(decay_of(g4.x), decay_of(g4.y), decay_of(g4.z), decay_of(g4.w));
  return v;
}

/// Stores a warp tile (RPW rows, the lane's 4 columns) at dst = the lane's first element.
template <class StateT, int RPW>
__device__ __forceinline__ void store_tile(StateT* dst, const float4 (&S)[RPW]) {
#pragma unroll
  for (int i = 0; i < RPW; ++i) StateIO<StateT>::store(dst + i * kHeadDim, S[i]);
}

}  // namespace kda::cuda
