// benchmarks/ladder/rows_prepared.cu — a decode step split in two kernels, a prologue kernel
// and a row kernel (docs/PERFORMANCE.md, Next 1). The row half asks: how fast does one CTA per
// item stream its fp32 state through the Split/Wide chunk pipeline (32-row chunks by bulk
// copy, two stages, four CTAs per SM, 64 registers) and run the delta rule and the gated
// RMSNorm, when the item's token vectors arrive prepared by another kernel — k̂, q̂·scale,
// e = exp(g), v, β, k̂·q̂: 516 floats, one bulk copy — instead of being computed by the item's
// own conv / gate prologue? The prologue half computes them. Rungs (llm.c dev/cuda style, each
// checked or timed in the same run):
//
//   move   the chunk pipeline only (state scaled by 0.999, no prepared vectors)
//   rows   + the prepared vectors, one delta-rule token per row (item.cuh delta_rows, the
//          step kernel's arithmetic) and the RMSNorm output; checked against a CPU
//          reference on a sample of items
//   prep   the other half: one CTA per (head, 16 requests) reads F_B[h] once into shared
//          memory for its 16 requests' gates (CUDA cores), runs the q/k/v conv from the
//          windows (DS, bf16) and writes the new window columns, the l2 norms, β, and the
//          prepared vectors; checked against a CPU reference on a sample of items
//   split  prep then rows in each step of the graph: the split decode step
//   rows/q4 the row loop of a record step of 4 tokens with prepared vectors (timing only)
//   empty  one step's fixed cost: the PDL hand-over, the slot load, one store per CTA
//   move/S the state only, an item's rows over S ∈ {1, 2, 4, 8} CTAs, every chunk in flight
//          at once: with `empty`, the floor of any step structure at small batch
//   rows/S `rows` with an item's rows over a cluster of S ∈ {1, 2, 4, 8} CTAs, every chunk in
//          flight at once, and the RMSNorm's Σo² summed across the cluster: a step whose
//          prologue costs nothing, so at one request the floor of any structure that splits an
//          item's rows and computes its prologue in the step; checked against the CPU reference
//   rowsa/S rows/S with the partials exchanged by st.async onto each rank's mbarrier instead of a
//          cluster barrier after the state's stores (checked against the CPU reference)
//   movec/S move/S launched as clusters of S (timing only): what the cluster launch itself costs
//   rows-/S rows/S without the norm's exchange and without a cluster (each rank normalises by its
//          own rows; timing only): what the row work costs with no cross-CTA step at all
//   flat   the state only, with no per-item structure: eight CTAs per SM walk every item's tile
//          in order with 16-byte loads and stores (four in flight per thread). No structure of
//          the step moves its state faster, so a target below `flat` is out of reach
//   arows/Qr an append cycle's row loop with its prologue done (issue "Append decode"): Qr steps
//          from a full row, step 0 folding the Qr pending records, writing the checkpoint back
//          and running its token, step j > 0 folding j records into a running copy that is not
//          written; the records staged by bulk copy beside the prepared vectors, g -> e, the fold
//          and the token per row (the step kernel's arithmetic), the token's record written, the
//          gated RMSNorm. Six CTAs per SM and one stage at Qr = 8, four at Qr = 16; arows4/8: four
//          and two stages; arows5/16: five and one stage (the step's Qr = 12-16 layout, which beats
//          arows/16 at four). Checked against the CPU reference
//   amove/Qr the same bytes without the arithmetic: what moving an append cycle's data costs
//   frowsC/q4 a fused verify step's row loop with its prologue done (issue "Verify steps at decode
//          speed"): the q = 4 pending records staged beside the four tokens' prepared vectors, per
//          chunk the fold, the committed rows stored to the checkpoint, then the four delta-rule
//          tokens (record mode: the state not written after them), each token's record (u of
//          every row, k | g) and bf16(o) written (no RMSNorm, as rows/q4). C CTAs per SM: 5 (one
//          stage), 4 (two), 2 (every chunk in flight). Checked against the CPU reference
//   fmove/q4 the same bytes without the arithmetic (two CTAs per SM, every chunk in flight)
//   rowsio `rows` at the decode step's own bytes (timing only): the window columns read and written in place,
//          the q / k / v inputs, out gate, raw gate (gate mode 2) and β read, the output written, by the step's
//          first wave, with no prepared vectors and a prologue free of the conv taps, SiLU, l2 norms and gate
//          function; `rows` reads 2 KiB of prepared vectors per item where the step moves 6 KiB of these
//   moveio the same bytes with `move`'s row loop
//   rowsio/1 `rowsio` with every chunk in flight (rows/1's form: one stage per chunk, three CTAs per SM)
//   rows16, move16 `rows` and `move` with bf16 state (issue "Decode faster …": bf16 at <= 1.15 x
//          its floor from 6144 items): 8 KiB chunks, the rows kept in fp32 while the item runs and
//          stored rounded (SPEC §9), six CTAs per SM with two stages (the step's bf16 q = 1
//          layout), rows16/4 every chunk in flight, rows16c4 four CTAs per SM. rows16 is checked
//          against the CPU reference
//   rows16io, rows16io/4 `rowsio` with bf16 state (the vectors read per chunk from shared memory), six CTAs per
//          SM with two stages / every chunk in flight: the bf16 step's own bytes (timing only)
//
// `--append` runs only the append rungs (Qr = 8 and 16) after their checks; `--fused` only the
// fused rungs; `--bf16` only the bf16 rungs (rows16io among them).
//
// `--io` times only move, rows, moveio, rowsio and rowsio/1 after the checks (the decode bounds at the step's own bytes).
// `--sms N` times the rungs on a green context of N SMs (kda_bench's `--sms`; `flat` keeps its eight CTAs per SM of
// the whole device, and the checks run on the whole device).
// `--floors` times only the data-movement rungs (move, moveio, rowsio, empty, move/S, flat) and rows/S, rowsa/S,
// movec/S, rows-/S after the checks:
// the ladder over the decode grid that says which decode targets any structure can reach,
// e.g. LADDER="rows_prepared 48 8 --floors; rows_prepared 96 8 --floors; …".
//
// Timing follows BENCHMARKS.md: one CUDA graph of N steps on disjoint slots (pool ≫ 5× L2),
// 15 replays, median / N; the floor counts what the row kernel moves (state read + write,
// the prepared vectors, the out-gate input, the output) and, beside it, the full decode
// step's floor (kda_bench's bytes): the row kernel plus the prologue kernel have to beat
// kda_bench's decode time at the same H and B for the split to pay.
//
// Build: nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude \
//          benchmarks/ladder/rows_prepared.cu -o rows_prepared
//        (or the CMake target rows_prepared: cmake -DKDA_BUILD_BENCHMARKS=ON, ninja rows_prepared)
// Run:   ./rows_prepared [H B]   (default 96 256); on the device machine, built here and carried:
//        BIN=.gpu/bin STAGES=ladder LADDER="rows_prepared 96 256" scripts/gpu_run.sh
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda/ptx>
#include <random>
#include <string>
#include <vector>

#include "../bench_cuda.h"
#include "kda/cuda/item.cuh"

namespace cg = cooperative_groups;
namespace ptx = ::cuda::ptx;
using kda::cuda::bulk_g2s;
using kda::cuda::mbar_wait;

constexpr int K = 128, kTile = K * K, kThreads = 256, kRPW = 4, kChunk = 32, kChunks = 4, kStages = 2;
constexpr int kPrep = 4 * K + 4;             // k̂ | q̂·scale | e | v | β, k̂·q̂, pad
constexpr int kPrepBytes = kPrep * 4;        // 2064, a multiple of 16
constexpr int kStageBytes = kChunk * K * 4;  // 16 KiB
constexpr int kStateOff = (kPrepBytes + 127) / 128 * 128;
constexpr int kSmem = kStateOff + kStages * kStageBytes;
constexpr float kEps = 1e-5f;

constexpr int kRB = 16;  // requests per prologue CTA
constexpr int kPrepSmem = (K * K * 2) + (kRB * K * 4) + (kRB * 3 * K * 4) + (kRB * K * 4);
constexpr float kLowerBound = -5.0f;

struct PrepArgs {
  const uint16_t* qkv;   // [B, 3D] bf16 (q, k, v sections)
  const uint16_t* f_a;   // [B, 128] bf16
  const uint16_t* beta;  // [B, H] bf16
  const int32_t* slots;  // [B]
  uint16_t* conv;        // [slots, 3D, 3] bf16 (DS windows, conv_dim_first)
  const float* conv_w;   // [3, 4, D] fp32 (the library's derived layout)
  const uint16_t* f_b;   // [D, 128] bf16
  const float* A_log;    // [H]
  const float* dt_bias;  // [D]
  float* prep;           // [B·H, kPrep]
  int H, B;
};

/// The prologue of kRB requests of head h (blockIdx.x = h, blockIdx.y = request tile).
__global__ void __launch_bounds__(kThreads) prep_kernel(const __grid_constant__ PrepArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  uint16_t* s_fb = reinterpret_cast<uint16_t*>(smem);        // [128][128] bf16
  float* s_fa = reinterpret_cast<float*>(smem + K * K * 2);  // [kRB][128]
  float* s_y = s_fa + kRB * K;                               // [kRB][384] conv outputs
  float* s_e = s_y + kRB * 3 * K;                            // [kRB][128] decays
  __shared__ uint64_t fb_bar;
  __shared__ float s_norm[kRB][3];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, h = blockIdx.x, b0 = blockIdx.y * kRB;
  const int D = a.H * K, nb = min(kRB, a.B - b0);
  if (tid == 0) {
    ptx::mbarrier_init(&fb_bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  if (tid == 0) {  // the head's F_B rows: a weight, before the PDL wait
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &fb_bar, K * K * 2);
    bulk_g2s(s_fb, a.f_b + int64_t(h) * K * K, K * K * 2, &fb_bar);
  }
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  for (int i = tid; i < kRB * K; i += kThreads)
    s_fa[i] = i / K < nb ? kda::bf16_to_f32(a.f_a[int64_t(b0 + i / K) * K + i % K]) : 0.f;
  // conv + SiLU of the 384 channels of head h for each request; new window columns written
  for (int i = tid; i < kRB * 3 * K; i += kThreads) {
    const int r = i / (3 * K), c = i % (3 * K), g = c / K, ch = g * D + h * K + c % K;
    if (r >= nb) break;
    const int b = b0 + r;
    uint16_t* win = a.conv + (int64_t(a.slots[b]) * 3 * D + ch) * 3;
    const float w0 = kda::bf16_to_f32(win[0]), w1 = kda::bf16_to_f32(win[1]), w2 = kda::bf16_to_f32(win[2]);
    const uint16_t xb = a.qkv[int64_t(b) * 3 * D + ch];
    const float x = kda::bf16_to_f32(xb);
    float acc = 0.f;
    acc = fmaf(a.conv_w[(g * 4 + 0) * D + h * K + c % K], w0, acc);
    acc = fmaf(a.conv_w[(g * 4 + 1) * D + h * K + c % K], w1, acc);
    acc = fmaf(a.conv_w[(g * 4 + 2) * D + h * K + c % K], w2, acc);
    acc = fmaf(a.conv_w[(g * 4 + 3) * D + h * K + c % K], x, acc);
    s_y[r * 3 * K + c] = kda::silu(acc);
    win[0] = win[1], win[1] = win[2], win[2] = xb;
  }
  mbar_wait(&fb_bar, 0);
  __syncthreads();  // s_fa, s_y, s_fb
  // gates: two threads per gate row (a half of F_B's row each), the kRB requests in turn
  {
    const int gi = tid >> 1, half = tid & 1;
    const float av = expf(a.A_log[h]), dtb = a.dt_bias[h * K + gi];
    uint4 fb[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) fb[j] = reinterpret_cast<const uint4*>(s_fb + gi * K + half * 64)[j];
    for (int r = 0; r < nb; ++r) {
      float z = kda::cuda::gate_dot_f4<8>(fb, reinterpret_cast<const float4*>(s_fa + r * K + half * 64));
      z += __shfl_xor_sync(0xffffffffu, z, 1);
      if (half == 0) s_e[r * K + gi] = kda::decay_of(kda::activate_gate(z + dtb, av, true, kLowerBound));
    }
  }
  // l2 norms and k·q per request: one warp per request
  for (int r = warp; r < nb; r += kThreads / 32) {
    float sq = 0.f, sk = 0.f, sqk = 0.f;
    for (int c = lane; c < K; c += 32) {
      const float yq = s_y[r * 3 * K + c], yk = s_y[r * 3 * K + K + c];
      sq = fmaf(yq, yq, sq), sk = fmaf(yk, yk, sk), sqk = fmaf(yq, yk, sqk);
    }
    sq = kda::cuda::warp_sum(sq), sk = kda::cuda::warp_sum(sk), sqk = kda::cuda::warp_sum(sqk);
    if (lane == 0)
      s_norm[r][0] = 1.0f / sqrtf(sq + kda::kL2Eps), s_norm[r][1] = 1.0f / sqrtf(sk + kda::kL2Eps), s_norm[r][2] = sqk;
  }
  __syncthreads();
  // the prepared vectors: k̂ | q̂·scale | e | v | β, k̂·q̂·scale
  for (int i = tid; i < nb * kPrep; i += kThreads) {
    const int r = i / kPrep, j = i % kPrep, b = b0 + r;
    const float iq = s_norm[r][0], ik = s_norm[r][1];
    float v;
    if (j < K)
      v = s_y[r * 3 * K + K + j] * ik;
    else if (j < 2 * K)
      v = s_y[r * 3 * K + (j - K)] * iq * kda::kQScale;
    else if (j < 3 * K)
      v = s_e[r * K + (j - 2 * K)];
    else if (j < 4 * K)
      v = s_y[r * 3 * K + 2 * K + (j - 3 * K)];
    else if (j == 4 * K)
      v = kda::sigmoidf_(kda::bf16_to_f32(a.beta[int64_t(b) * a.H + h]));
    else if (j == 4 * K + 1)
      v = s_norm[r][2] * ik * iq * kda::kQScale;
    else
      v = 0.f;
    a.prep[(int64_t(b) * a.H + h) * kPrep + j] = v;
  }
}

/// The arguments of a decode row kernel, with fp32 state (`Args`) or bf16 (`Args16`, rows16).
template <class StateT>
struct RowArgs {
  StateT* state;         // [slots, H, V, K]
  const int32_t* slots;  // [B] of this step
  const float* prep;     // [B·H, kPrep] of this step
  const uint16_t* og;    // [B, D] out-gate input (bf16)
  const float* norm_w;   // [K]
  uint16_t* out;         // [B, D] bf16
  int H;
};
using Args = RowArgs<float>;
using Args16 = RowArgs<uint16_t>;

/// Step i's arguments (its slots, prepared vectors, out gates and outputs in the per-step buffers).
template <class StateT>
RowArgs<StateT> row_args(StateT* state, const int32_t* slots, const float* prep, const uint16_t* og, const float* nw,
                         uint16_t* out, int H, int B, int i) {
  const size_t items = size_t(H) * B, D = size_t(H) * K;
  return {state, slots + size_t(i) * B, prep + i * items * kPrep, og + i * B * D, nw, out + i * B * D, H};
}

/// A stage's bytes: one chunk of kChunk rows of StateT (fp32 16 KiB, bf16 8 KiB).
template <class StateT>
__host__ __device__ constexpr int stage_bytes_of() {
  return kChunk * K * int(sizeof(StateT));
}

/// Thread 0 issues the bulk copies of the item's first kSt chunks into their stages.
template <int kSt, class StateT = float>
__device__ __forceinline__ void first_chunks(unsigned char* s_state, uint64_t* full, const StateT* tile) {
  constexpr int kBytes = stage_bytes_of<StateT>();
  for (int c = 0; c < kSt; ++c) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[c], kBytes);
    bulk_g2s(s_state + c * kBytes, tile + c * kChunk * K, kBytes, &full[c]);
  }
}

/// The chunk pipeline of the row kernels (the step kernel's): waits for chunk c, reads the
/// warp's kRPW rows of it into S (fp32, as stored), and hands the stage to chunk c + kSt
/// (loads performed, proxies fenced, then the barrier) when there is one.
template <int kSt = kStages, class StateT = float>
__device__ __forceinline__ void chunk_in(float4 (&S)[kRPW], unsigned char* s_state, uint64_t* full, const StateT* tile,
                                         int c, int tid, int warp, int lane) {
  constexpr int kBytes = stage_bytes_of<StateT>();
  const int s = c % kSt;
  mbar_wait(&full[s], uint32_t(c / kSt) & 1u);
  const StateT* st = reinterpret_cast<const StateT*>(s_state + s * kBytes) + (warp * kRPW) * K + lane * 4;
#pragma unroll
  for (int i = 0; i < kRPW; ++i) S[i] = kda::cuda::load_smem_row4(st + i * K);
  if (c + kSt < kChunks) {
#pragma unroll
    for (int i = 0; i < kRPW; ++i) asm volatile("" ::"f"(S[i].x), "f"(S[i].y), "f"(S[i].z), "f"(S[i].w));
    ptx::fence_proxy_async(ptx::space_shared);
    __syncthreads();
    if (tid == 0) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[s], kBytes);
      bulk_g2s(s_state + s * kBytes, tile + (c + kSt) * kChunk * K, kBytes, &full[s]);
    }
  }
}

/// The row kernels' barriers (kSt stages and the prepared vectors'), then the PDL hand-over (the
/// previous step's tail overlaps everything before it).
template <int kSt>
__device__ __forceinline__ void begin_rows(uint64_t* full, uint64_t* prep_bar) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSt; ++s) ptx::mbarrier_init(&full[s], 1);
    ptx::mbarrier_init(prep_bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
}

/// One delta-rule token on the warp's rows from the prepared vectors `pt` (k̂ | q̂·scale | e | v |
/// β, k̂·q̂), read per chunk as the six-CTA step kernel reads its token vectors.
__device__ __forceinline__ void prepared_token(float4 (&S)[kRPW], const float* pt, int crow, int lane, float& u,
                                               float& o) {
  const float4 k4 = *reinterpret_cast<const float4*>(pt + 0 * K + lane * 4);
  const float4 q4 = *reinterpret_cast<const float4*>(pt + 1 * K + lane * 4);
  const float4 e4 = *reinterpret_cast<const float4*>(pt + 2 * K + lane * 4);
  kda::cuda::delta_rows<kRPW>(S, k4, q4, e4, pt[4 * K], pt[4 * K + 1], pt + 3 * K + crow, lane, u, o);
}

/// The gated RMSNorm of an item's 128 outputs o (shared memory, complete) into out[v] (bf16),
/// threads 0–127; the out gate and norm weight loaded here, after the row loop (as the six-CTA
/// step kernel does: loaded before it they are live across it, and its rungs spill at 40
/// registers).
__device__ __forceinline__ void gated_norm_late(const float* s_o, const uint16_t* og, const float* norm_w,
                                                uint16_t* out, int tid, int lane) {
  if (tid < K) {
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < K; j += 32) ss = fmaf(s_o[j + lane], s_o[j + lane], ss);
    ss = kda::cuda::warp_sum(ss);
    const float g = kda::sigmoidf_(kda::bf16_to_f32(og[tid]));
    const float rn = 1.0f / sqrtf(ss / float(K) + kEps);
    out[tid] = kda::f32_to_bf16(s_o[tid] * rn * norm_w[tid] * g);
  }
}

/// The row loop of the row kernels: for each chunk, its rows in S (chunk_in), then
/// body(crow, S, urow, writer) — crow the warp's first row; after delta_rows, lane l holds u
/// (l < 16) or o (l >= 16) of row crow + urow (− kRPW for o), written by the lanes `writer`.
template <int kSt = kStages, class StateT = float, class Body>
__device__ __forceinline__ void row_chunks(unsigned char* s_state, uint64_t* full, const StateT* tile, int tid,
                                           int warp, int lane, Body&& body) {
  constexpr int G2 = 16 / kRPW;
  const int urow = lane / G2;
  const bool writer = lane % G2 == 0;
#pragma unroll 1
  for (int c = 0; c < kChunks; ++c) {
    const int crow = c * kChunk + warp * kRPW;
    float4 S[kRPW];
    chunk_in<kSt>(S, s_state, full, tile, c, tid, warp, lane);
    body(crow, S, urow, writer);
  }
}

/// The row kernels' start, as the step kernel's: barriers, the PDL hand-over (the previous
/// step's tail overlaps), the request's slot (its one round trip before the copies), then
/// thread 0's bulk copies of the item's prepared vectors (`prep_bytes`, none when 0) and of
/// its first kSt chunks. Returns the item's state tile.
template <int kSt = kStages, class StateT = float>
__device__ __forceinline__ StateT* start_rows(StateT* state, const int32_t* slots, int H, int item, uint64_t* full,
                                              uint64_t* prep_bar, unsigned char* s_state, float* s_prep,
                                              const float* prep_src, uint32_t prep_bytes) {
  begin_rows<kSt>(full, prep_bar);
  StateT* tile = state + (int64_t(slots[item / H]) * H + item % H) * kTile;
  if (threadIdx.x == 0) {
    if (prep_bytes) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, prep_bar, prep_bytes);
      bulk_g2s(s_prep, prep_src, prep_bytes, prep_bar);
    }
    first_chunks<kSt>(s_state, full, tile);
  }
  return tile;
}

template <bool kMath>
__global__ void __launch_bounds__(kThreads, 4) rows_kernel(const __grid_constant__ Args a) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kStages], prep_bar;
  __shared__ float s_o[K];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int item = blockIdx.x, b = item / a.H, h = item % a.H;
  float* s_prep = reinterpret_cast<float*>(smem);
  unsigned char* s_state = smem + kStateOff;
  float* tile = start_rows(a.state, a.slots, a.H, item, full, &prep_bar, s_state, s_prep,
                           a.prep + int64_t(item) * kPrep, kMath ? kPrepBytes : 0);
  float4 k4{}, q4{}, e4{};
  float beta = 0.f, kq = 0.f, og = 0.f, nw = 0.f;
  if (kMath) {
    if (tid < K) og = kda::sigmoidf_(kda::bf16_to_f32(a.og[int64_t(b) * a.H * K + h * K + tid])), nw = a.norm_w[tid];
    mbar_wait(&prep_bar, 0);
    k4 = *reinterpret_cast<const float4*>(s_prep + 0 * K + lane * 4);
    q4 = *reinterpret_cast<const float4*>(s_prep + 1 * K + lane * 4);
    e4 = *reinterpret_cast<const float4*>(s_prep + 2 * K + lane * 4);
    beta = s_prep[4 * K];
    kq = s_prep[4 * K + 1];
  }
  row_chunks(s_state, full, tile, tid, warp, lane, [&](int crow, float4(&S)[kRPW], int urow, bool writer) {
    if (kMath) {
      float u, o;
      kda::cuda::delta_rows<kRPW>(S, k4, q4, e4, beta, kq, s_prep + 3 * K + crow, lane, u, o);
      if (writer && lane >= 16) s_o[crow + urow - kRPW] = o;
    } else {
#pragma unroll
      for (int i = 0; i < kRPW; ++i) S[i].x *= 0.999f, S[i].y *= 0.999f, S[i].z *= 0.999f, S[i].w *= 0.999f;
    }
    kda::cuda::store_tile<float, kRPW>(tile + crow * K + lane * 4, S);
  });
  if (kMath) {
    __syncthreads();  // s_o complete
    if (tid < K) {
      float ss = 0.f;
#pragma unroll
      for (int j = 0; j < K; j += 32) ss = fmaf(s_o[j + lane], s_o[j + lane], ss);
      ss = kda::cuda::warp_sum(ss);
      const float rn = 1.0f / sqrtf(ss / float(K) + kEps);
      a.out[int64_t(b) * a.H * K + h * K + tid] = kda::f32_to_bf16(s_o[tid] * rn * nw * og);
    }
  }
}

/// `rowsio` / `moveio` (see the top): the decode step's bytes exactly — besides the state, each item's
/// window columns read and written in place (SD: [slots, 3, 3D] bf16), its q / k / v inputs, out gate,
/// raw gate (gate mode 2) and β read, its output written — with the step's first wave (each thread its
/// channels' loads, issued together after the slot), the row loop of `rows` (kMath) or of `move`, and a
/// prologue reduced to what carries the loaded values into the rows without the conv taps, SiLU, l2
/// norms or gate function: y = w0 + w1 + w2 + x per channel, k = 0.08·y_k, q = 0.008·y_q, e = 1 − 2^-7·|z|,
/// v = y_v, β from its logit's bits, k·q taken as 0 (timing only: the row loop's arithmetic is the
/// step's, its values are not checked). What a step with the decode's bytes and a free prologue takes.
template <class StateT>
struct ArgsIOT {
  StateT* state;         // [slots, H, V, K]
  const int32_t* slots;  // [B] of this step
  const uint16_t* qkv;   // [B, 3D] bf16
  const uint16_t* og;    // [B, D] bf16
  const uint16_t* gate;  // [B, D] bf16 (the raw gate, gate mode 2)
  const uint16_t* beta;  // [B, H] bf16
  uint16_t* conv;        // [slots, 3, 3D] bf16 (SD windows; the pool's window buffer read this way)
  const float* norm_w;   // [K]
  uint16_t* out;         // [B, D] bf16
  int H;
};
using ArgsIO = ArgsIOT<float>;

/// (bf16 state, `rows16io`: the token vectors read per chunk from shared memory, as `rows16` reads
/// its prepared ones, so that six CTAs per SM fit without spills)
template <bool kMath, int kSt = kStages, int kCtas = 4, class StateT = float>
__global__ void __launch_bounds__(kThreads, kCtas) rows_io_kernel(const __grid_constant__ ArgsIOT<StateT> a) {
  constexpr bool kF32 = sizeof(StateT) == 4;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kSt], prep_bar;
  __shared__ float s_o[K];
  __shared__ __align__(16) float s_vec[4 * K + 4];  // k | q | e | v, β, k·q (float4 reads)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int item = blockIdx.x, b = item / a.H, h = item % a.H, D = a.H * K;
  unsigned char* s_state = smem;
  begin_rows<kSt>(full, &prep_bar);
  const int slot = a.slots[b];
  StateT* tile = a.state + (int64_t(slot) * a.H + h) * kTile;
  if (tid == 0) first_chunks<kSt, StateT>(s_state, full, tile);
  // the first wave: threads 0–127 the q and k channel of their index, 128–255 the v channel, the raw
  // gate and the out gate of row tid − 128; thread 0 β too
  const int c = tid & (K - 1);
  const int ch0 = tid < K ? h * K + c : 2 * D + h * K + c, ch1 = D + h * K + c;
  // SD windows (kda_bench's `--layout sd`, vLLM's): column j of channel ch at conv[slot][j][ch], so a warp's
  // access of one column is 32 contiguous channels
  const int64_t cs = 3 * int64_t(D);
  uint16_t* w0p = a.conv + int64_t(slot) * 3 * cs + ch0;
  uint16_t* w1p = a.conv + int64_t(slot) * 3 * cs + ch1;
  const uint16_t* xr = a.qkv + int64_t(b) * 3 * D;
  uint16_t w0[3], w1[3] = {0, 0, 0};
  for (int j = 0; j < 3; ++j) w0[j] = w0p[j * cs];
  if (tid < K)
    for (int j = 0; j < 3; ++j) w1[j] = w1p[j * cs];
  const uint16_t x0 = xr[ch0], x1 = tid < K ? xr[ch1] : uint16_t(0);
  const uint16_t zg = tid >= K ? a.gate[int64_t(b) * D + h * K + c] : uint16_t(0);
  const uint16_t ogr = tid >= K ? a.og[int64_t(b) * D + h * K + c] : uint16_t(0);
  const uint16_t bt = tid == 0 ? a.beta[int64_t(b) * a.H + h] : uint16_t(0);
  const float nw = tid >= K ? a.norm_w[c] : 0.f;
  const float y0 =
      ((kda::bf16_to_f32(w0[0]) + kda::bf16_to_f32(w0[1])) + kda::bf16_to_f32(w0[2])) + kda::bf16_to_f32(x0);
  const float y1 =
      ((kda::bf16_to_f32(w1[0]) + kda::bf16_to_f32(w1[1])) + kda::bf16_to_f32(w1[2])) + kda::bf16_to_f32(x1);
  if (tid < K) {
    s_vec[K + c] = 0.008f * y0;  // q
    s_vec[c] = 0.08f * y1;       // k
  } else {
    s_vec[3 * K + c] = y0;  // v
    s_vec[2 * K + c] = 1.f - 0.0078125f * fabsf(kda::bf16_to_f32(zg));
  }
  if (tid == 0) s_vec[4 * K] = 0.25f + 0.5f * (kda::bf16_to_f32(bt) > 0.f);
  if constexpr (!kF32)
    if (tid == 0) s_vec[4 * K + 1] = 0.f;  // k·q (prepared_token's)
  // the window's new columns: the two newest old ones and x
  w0p[0] = w0[1], w0p[cs] = w0[2], w0p[2 * cs] = x0;
  if (tid < K) w1p[0] = w1[1], w1p[cs] = w1[2], w1p[2 * cs] = x1;
  __syncthreads();  // the vectors staged
  float4 k4{}, q4{}, e4{};
  float beta = 0.f;
  if constexpr (kF32) {
    k4 = *reinterpret_cast<const float4*>(s_vec + 0 * K + lane * 4);
    q4 = *reinterpret_cast<const float4*>(s_vec + 1 * K + lane * 4);
    e4 = *reinterpret_cast<const float4*>(s_vec + 2 * K + lane * 4);
    beta = s_vec[4 * K];
  }
  row_chunks<kSt, StateT>(s_state, full, tile, tid, warp, lane, [&](int crow, float4(&S)[kRPW], int urow, bool writer) {
    if (kMath) {
      float u, o;
      if constexpr (kF32)
        kda::cuda::delta_rows<kRPW>(S, k4, q4, e4, beta, 0.f, s_vec + 3 * K + crow, lane, u, o);
      else
        prepared_token(S, s_vec, crow, lane, u, o);
      if (writer && lane >= 16) s_o[crow + urow - kRPW] = o;
    } else {
#pragma unroll
      for (int i = 0; i < kRPW; ++i) S[i].x *= 0.999f, S[i].y *= 0.999f, S[i].z *= 0.999f, S[i].w *= 0.999f;
      if (lane == 0) s_o[crow] = S[0].x;
    }
    kda::cuda::store_tile<StateT, kRPW>(tile + crow * K + lane * 4, S);
  });
  __syncthreads();  // s_o complete
  if (tid >= K) {   // the gated RMSNorm of the item's output (warps 4–7 hold the out gate)
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < K; j += 32) ss = fmaf(s_o[j + lane], s_o[j + lane], ss);
    ss = kda::cuda::warp_sum(ss);
    const float g = kda::sigmoidf_(kda::bf16_to_f32(ogr));
    const float rn = 1.0f / sqrtf(ss / float(K) + kEps);
    a.out[int64_t(b) * D + h * K + c] = kda::f32_to_bf16(s_o[c] * rn * nw * g);
  }
}

/// `rows/q4`: the row loop of a record verify step of Q tokens with its prologue done — Q sets
/// of prepared vectors per item, per chunk the Q delta-rule tokens of item.cuh (the step
/// kernel's arithmetic), u of every row and token written as the step's records are, o
/// written as bf16 (no RMSNorm), the state not written back (record). Timing only: it asks
/// whether the record step's target (<= 1.1x decode) is reachable with this row loop at all,
/// next to `kda_bench --mode record --q 4` at the same H and B.
struct ArgsQ {
  float* state;          // [slots, H, V, K] (read only)
  const int32_t* slots;  // [B]
  const float* prep;     // [B·H, Q, kPrep]
  float* rec;            // [B·H, Q, K] u per token
  uint16_t* out;         // [B·H, Q, K] bf16(o)
  int H;
};

template <int Q>
__global__ void __launch_bounds__(kThreads, 4) rows_q_kernel(const __grid_constant__ ArgsQ a) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kStages], prep_bar;
  constexpr int kPrepQBytes = Q * kPrepBytes, kStateOffQ = (kPrepQBytes + 127) / 128 * 128;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int item = blockIdx.x;
  float* s_prep = reinterpret_cast<float*>(smem);
  unsigned char* s_state = smem + kStateOffQ;
  const float* tile = start_rows(a.state, a.slots, a.H, item, full, &prep_bar, s_state, s_prep,
                                 a.prep + int64_t(item) * Q * kPrep, kPrepQBytes);
  mbar_wait(&prep_bar, 0);
  row_chunks(s_state, full, tile, tid, warp, lane, [&](int crow, float4(&S)[kRPW], int urow, bool writer) {
    for (int t = 0; t < Q; ++t) {
      const float* pt = s_prep + t * kPrep;
      const float4 k4 = *reinterpret_cast<const float4*>(pt + 0 * K + lane * 4);
      const float4 q4 = *reinterpret_cast<const float4*>(pt + 1 * K + lane * 4);
      const float4 e4 = *reinterpret_cast<const float4*>(pt + 2 * K + lane * 4);
      float u, o;
      kda::cuda::delta_rows<kRPW>(S, k4, q4, e4, pt[4 * K], pt[4 * K + 1], pt + 3 * K + crow, lane, u, o);
      if (writer) {
        const int64_t r = (int64_t(item) * Q + t) * K + crow;
        if (lane < 16)
          a.rec[r + urow] = u;
        else
          a.out[r + urow - kRPW] = kda::f32_to_bf16(o);
      }
    }
  });
}

/// The floor rungs of a small batch: `empty` is one step's fixed cost (the PDL hand-over, the
/// request's slot load, one store per CTA); `move/S` moves an item's state with its rows over
/// S CTAs (128 / S rows each, every chunk of them in flight at once: one bulk copy per chunk of
/// min(32, 128 / S) rows), scaled by 0.999 and stored back, no KDA arithmetic. Together they
/// bound what any structure of the step can reach at one request (issue "Decode faster than
/// vLLM's K3 kernel": B = 1 <= 5 us).
__global__ void __launch_bounds__(kThreads) empty_kernel(const __grid_constant__ Args a) {
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  const int item = blockIdx.x, b = item / a.H;
  if (threadIdx.x == 0) a.out[item] = uint16_t(a.slots[b]);
}

template <int S>
__global__ void __launch_bounds__(kThreads) move_split_kernel(const __grid_constant__ Args a) {
  constexpr int kRows = K / S, kCr = kRows < 32 ? kRows : 32, kNc = kRows / kCr, kRpw = kCr / 8;
  static_assert(kRpw >= 1 && kRpw * 8 == kCr, "rows per warp");
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kNc];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int item = blockIdx.x / S, rank = blockIdx.x % S, b = item / a.H, h = item % a.H;
  if (tid == 0) {
    for (int c = 0; c < kNc; ++c) ptx::mbarrier_init(&full[c], 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  float* tile = a.state + (int64_t(a.slots[b]) * a.H + h) * kTile + rank * kRows * K;
  if (tid == 0)
    for (int c = 0; c < kNc; ++c) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[c], kCr * K * 4);
      bulk_g2s(smem + c * kCr * K * 4, tile + c * kCr * K, kCr * K * 4, &full[c]);
    }
  for (int c = 0; c < kNc; ++c) {
    mbar_wait(&full[c], 0);
    const float* st = reinterpret_cast<const float*>(smem + c * kCr * K * 4) + warp * kRpw * K + lane * 4;
    float4 v[kRpw];
#pragma unroll
    for (int i = 0; i < kRpw; ++i) {
      v[i] = *reinterpret_cast<const float4*>(st + i * K);
      v[i].x *= 0.999f, v[i].y *= 0.999f, v[i].z *= 0.999f, v[i].w *= 0.999f;
    }
    kda::cuda::store_tile<float, kRpw>(tile + (c * kCr + warp * kRpw) * K + lane * 4, v);
  }
}

/// `rows/S` (see the top): an item's 128 / S rows per CTA of a cluster of S (rank = the CTA's
/// rank in it), every chunk of them in flight at once (as move/S), the item's prepared vectors
/// copied by every rank, one delta-rule token per row and the gated RMSNorm. The norm's Σo²: each
/// rank sums its rows' squares and stores the partial into every rank's shared memory (after a
/// cluster barrier that says every rank has started), then every rank adds the S partials in
/// rank order, so all ranks compute the same rn.
/// kExch, how the partials travel: 0 (`rows/S`) the stores above, then a cluster barrier
/// (arrive.release, wait.acquire); 2 (`rowsa/S`) one st.async per destination rank (lane r of
/// warp 0 to rank r), completing on the receiver's local mbarrier, which expects S·4 bytes: no
/// barrier after the exchange, so no release that would order the state's global stores before
/// it; 1 (`rows-/S`, timing only, launched without a cluster) none: each rank normalises by its
/// own rows' Σo², what the row work costs with no cross-CTA step at all.
template <int S, int kExch = 0>
__global__ void __launch_bounds__(kThreads) rows_split_kernel(const __grid_constant__ Args a) {
  constexpr int kRows = K / S, kCr = kRows < 32 ? kRows : 32, kNc = kRows / kCr, kRpw = kCr / 8;
  constexpr int kG2 = 16 / kRpw;  // delta_rows: lanes 0–15 hold u, 16–31 o of row (lane − 16) / kG2
  static_assert(kRpw >= 1 && kRpw * 8 == kCr, "rows per warp");
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr bool kNorm = kExch != 1;
  __shared__ uint64_t full[kNc], prep_bar, red_bar;
  __shared__ float s_o[kRows], s_part[S];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int item = blockIdx.x / S, b = item / a.H, h = item % a.H;
  const int rank = S == 1 ? 0 : kNorm ? int(cg::this_cluster().block_rank()) : int(blockIdx.x % S);
  float* s_prep = reinterpret_cast<float*>(smem);
  unsigned char* s_state = smem + kStateOff;
  if (tid == 0) {
    for (int c = 0; c < kNc; ++c) ptx::mbarrier_init(&full[c], 1);
    ptx::mbarrier_init(&prep_bar, 1);
    if constexpr (kExch == 2) ptx::mbarrier_init(&red_bar, 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
    // the S partials' bytes; a remote complete_tx may come before or after this arrival
    if constexpr (kExch == 2)
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &red_bar, S * 4);
  }
  __syncthreads();
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  if constexpr (S > 1 && kNorm) ptx::barrier_cluster_arrive(ptx::sem_relaxed);  // this rank has started
  float* tile = a.state + (int64_t(a.slots[b]) * a.H + h) * kTile + int64_t(rank) * kRows * K;
  if (tid == 0) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &prep_bar, kPrepBytes);
    bulk_g2s(s_prep, a.prep + int64_t(item) * kPrep, kPrepBytes, &prep_bar);
    for (int c = 0; c < kNc; ++c) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[c], kCr * K * 4);
      bulk_g2s(s_state + c * kCr * K * 4, tile + c * kCr * K, kCr * K * 4, &full[c]);
    }
  }
  float og = 0.f, nw = 0.f;
  if (tid < kRows) {
    const int v = rank * kRows + tid;
    og = kda::sigmoidf_(kda::bf16_to_f32(a.og[int64_t(b) * a.H * K + h * K + v]));
    nw = a.norm_w[v];
  }
  mbar_wait(&prep_bar, 0);
  const float4 k4 = *reinterpret_cast<const float4*>(s_prep + 0 * K + lane * 4);
  const float4 q4 = *reinterpret_cast<const float4*>(s_prep + 1 * K + lane * 4);
  const float4 e4 = *reinterpret_cast<const float4*>(s_prep + 2 * K + lane * 4);
  const float beta = s_prep[4 * K], kq = s_prep[4 * K + 1];
  for (int c = 0; c < kNc; ++c) {
    mbar_wait(&full[c], 0);
    const int crow = c * kCr + warp * kRpw;  // the warp's first row within the CTA's rows
    const float* st = reinterpret_cast<const float*>(s_state + c * kCr * K * 4) + warp * kRpw * K + lane * 4;
    float4 S4[kRpw];
#pragma unroll
    for (int i = 0; i < kRpw; ++i) S4[i] = *reinterpret_cast<const float4*>(st + i * K);
    float u, o;
    kda::cuda::delta_rows<kRpw>(S4, k4, q4, e4, beta, kq, s_prep + 3 * K + rank * kRows + crow, lane, u, o);
    if (lane >= 16 && lane % kG2 == 0) s_o[crow + (lane - 16) / kG2] = o;
    kda::cuda::store_tile<float, kRpw>(tile + crow * K + lane * 4, S4);
  }
  __syncthreads();  // s_o complete
  float ss = 0.f;
  if constexpr (S > 1 && !kNorm) {
    for (int i = lane; i < kRows; i += 32) ss = fmaf(s_o[i], s_o[i], ss);
    ss = kda::cuda::warp_sum(ss) * float(S);
  } else if constexpr (S > 1 && kExch == 2) {
    if (warp == 0) {
      for (int i = lane; i < kRows; i += 32) ss = fmaf(s_o[i], s_o[i], ss);
      ss = kda::cuda::warp_sum(ss);
    }
    ptx::barrier_cluster_wait();  // every rank has started: its red_bar is initialised
    if (warp == 0 && lane < S) kda::cuda::store_rank_async(s_part, rank, ss, &red_bar, uint32_t(lane));
    mbar_wait(&red_bar, 0);
    ss = 0.f;
#pragma unroll
    for (int r = 0; r < S; ++r) ss += s_part[r];
  } else if constexpr (S > 1) {
    if (warp == 0) {
      for (int i = lane; i < kRows; i += 32) ss = fmaf(s_o[i], s_o[i], ss);
      ss = kda::cuda::warp_sum(ss);
      ptx::barrier_cluster_wait();  // every rank has started: remote stores are allowed
      if (lane < S) cg::this_cluster().map_shared_rank(s_part, lane)[rank] = ss;
    } else {
      ptx::barrier_cluster_wait();
    }
    ptx::barrier_cluster_arrive(ptx::sem_release);
    ptx::barrier_cluster_wait(ptx::sem_acquire);
    ss = 0.f;
#pragma unroll
    for (int r = 0; r < S; ++r) ss += s_part[r];
  } else {
#pragma unroll
    for (int j = 0; j < K; j += 32) ss = fmaf(s_o[j + lane], s_o[j + lane], ss);
    ss = kda::cuda::warp_sum(ss);
  }
  if (tid < kRows) {
    const float rn = 1.0f / sqrtf(ss / float(K) + kEps);
    a.out[int64_t(b) * a.H * K + h * K + rank * kRows + tid] = kda::f32_to_bf16(s_o[tid] * rn * nw * og);
  }
}

/// `arows`, `amove` (Q = 1) and `frows`, `fmove` (Q = 4) (see the top): a step that folds the
/// item's pending records with its prologue done — an append step at one position of its cycle,
/// or a fused verify step of Q tokens. The records row of an item is its checkpoint slot's (SPEC
/// §4's default), R records a row. Per item: one barrier for the Q prepared vectors and the
/// `npend` pending records (bulk copies), kSt stages of 32-row chunks; per chunk the fold, the
/// committed rows stored to the checkpoint where `write_back` (a full append row, every fused
/// step), then the Q delta-rule tokens (the state not written after them); each token's record
/// (u of every row, k | g) at position pos0 + t of the row. Q = 1: the gated RMSNorm output (the
/// append step's); Q > 1: bf16(o) per token, no norm (as rows/q4). The new records overwrite
/// staged ones only after the staging barrier.
struct ArgsR {
  float* state;          // [slots, H, V, K] the checkpoints
  const int32_t* slots;  // [B] of this step
  const float* prep;     // [B·H, Q, kPrep] of this step
  float* rec_u;          // [slots, H, R, K] the records' u
  float* rec_kg;         // [slots, H, R, 2K] the records' k | g
  const uint16_t* og;    // [B, D] out-gate input (bf16; Q = 1)
  const float* norm_w;   // [K] (Q = 1)
  uint16_t* out;         // Q = 1: [B, D]; Q > 1: [B·H, Q, K] bf16
  int H, R, npend, pos0, write_back;
};

/// Shared memory of a staged-records rung: Q prepared vectors | records u [R][K] | k, g [R][2K],
/// then the stages.
__host__ __device__ constexpr int staged_state_off(int Q, int R) {
  return (Q * kPrepBytes + R * 3 * K * 4 + 127) / 128 * 128;
}

template <int Q, bool kMath, int kCtas, int kSt>
__global__ void __launch_bounds__(kThreads, kCtas) staged_rows_kernel(const __grid_constant__ ArgsR a) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kSt], prep_bar;
  __shared__ float s_o[K];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int item = blockIdx.x, b = item / a.H, h = item % a.H;
  const int np = a.npend, pos0 = a.pos0;
  float* s_prep = reinterpret_cast<float*>(smem);
  float* s_recu = s_prep + Q * kPrep;
  float* s_reckg = s_recu + a.R * K;
  unsigned char* s_state = smem + staged_state_off(Q, a.R);
  begin_rows<kSt>(full, &prep_bar);
  const int64_t row = int64_t(a.slots[b]) * a.H + h;  // the item's checkpoint and records row
  float* tile = a.state + row * kTile;
  float* ru = a.rec_u + row * a.R * K;
  float* rkg = a.rec_kg + row * a.R * 2 * K;
  if (tid == 0) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &prep_bar,
                                   uint32_t(Q * kPrepBytes + np * 3 * K * 4));
    bulk_g2s(s_prep, a.prep + int64_t(item) * Q * kPrep, Q * kPrepBytes, &prep_bar);
    if (np > 0) {
      bulk_g2s(s_recu, ru, uint32_t(np * K * 4), &prep_bar);
      bulk_g2s(s_reckg, rkg, uint32_t(np * 2 * K * 4), &prep_bar);
    }
    first_chunks<kSt>(s_state, full, tile);
  }
  mbar_wait(&prep_bar, 0);
  if (kMath) {
    for (int i = tid; i < np * K; i += kThreads) {  // the records' g -> e = exp(g), in place
      float* gp = s_reckg + (i / K) * 2 * K + K + i % K;
      *gp = kda::decay_of(*gp);
    }
  }
  __syncthreads();  // the decays; every staged record in before any is overwritten
  // the tokens' records k | g (the prepared k̂ and, standing in for g, e: the step's bytes)
  for (int i = tid; i < Q * 64; i += kThreads) {
    const int t = i / 64, j = i % 64;
    const float4 v = *reinterpret_cast<const float4*>(s_prep + t * kPrep + (j < 32 ? 0 : 2 * K) + (j & 31) * 4);
    *reinterpret_cast<float4*>(rkg + (pos0 + t) * 2 * K + j * 4) = v;
  }
  row_chunks<kSt>(s_state, full, tile, tid, warp, lane, [&](int crow, float4(&S)[kRPW], int urow, bool writer) {
    if (kMath) {
#pragma unroll 1
      for (int pp = 0; pp < np; ++pp) {
        const float4 kk = *reinterpret_cast<const float4*>(s_reckg + pp * 2 * K + lane * 4);
        const float4 ee = *reinterpret_cast<const float4*>(s_reckg + pp * 2 * K + K + lane * 4);
        kda::cuda::fold_record_e<kRPW>(S, s_recu + pp * K + crow, kk, ee);
      }
    } else if (a.write_back) {
#pragma unroll
      for (int i = 0; i < kRPW; ++i) S[i].x *= 0.999f, S[i].y *= 0.999f, S[i].z *= 0.999f, S[i].w *= 0.999f;
    }
    if (a.write_back) kda::cuda::store_tile<float, kRPW>(tile + crow * K + lane * 4, S);
#pragma unroll 1
    for (int t = 0; t < Q; ++t) {
      const float* pt = s_prep + t * kPrep;
      float u = S[0].x, o = S[0].y;
      if (kMath) prepared_token(S, pt, crow, lane, u, o);
      if (writer) {
        if (lane < 16)
          ru[(pos0 + t) * K + crow + urow] = u;
        else if (Q == 1)
          s_o[crow + urow - kRPW] = o;
        else
          a.out[(int64_t(item) * Q + t) * K + crow + urow - kRPW] = kda::f32_to_bf16(o);
      }
    }
  });
  if (Q == 1 && kMath) {
    __syncthreads();  // s_o complete
    const int64_t at = int64_t(b) * a.H * K + h * K;
    gated_norm_late(s_o, a.og + at, a.norm_w, a.out + at, tid, lane);
  }
}

/// `rows16`, `move16` (see the top): the row kernel with bf16 state. The token vectors are read
/// from the prepared vectors per chunk (the six-CTA step kernel's lean form: at 40 registers
/// they are not held across the loop).
constexpr int kStageBytes16 = stage_bytes_of<uint16_t>();  // 8 KiB

template <bool kMath, int kCtas, int kSt>
__global__ void __launch_bounds__(kThreads, kCtas) rows16_kernel(const __grid_constant__ Args16 a) {
  using IO = kda::cuda::StateIO<uint16_t>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[kSt], prep_bar;
  __shared__ float s_o[K];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int item = blockIdx.x, b = item / a.H, h = item % a.H;
  float* s_prep = reinterpret_cast<float*>(smem);
  unsigned char* s_state = smem + kStateOff;
  uint16_t* tile = start_rows<kSt>(a.state, a.slots, a.H, item, full, &prep_bar, s_state, s_prep,
                                   a.prep + int64_t(item) * kPrep, kMath ? kPrepBytes : 0);
  if (kMath) mbar_wait(&prep_bar, 0);
  row_chunks<kSt>(s_state, full, tile, tid, warp, lane, [&](int crow, float4(&S)[kRPW], int urow, bool writer) {
    if (kMath) {
      float u, o;
      prepared_token(S, s_prep, crow, lane, u, o);
      if (writer && lane >= 16) s_o[crow + urow - kRPW] = o;
    } else {
#pragma unroll
      for (int i = 0; i < kRPW; ++i) S[i].x *= 0.999f, S[i].y *= 0.999f, S[i].z *= 0.999f, S[i].w *= 0.999f;
    }
#pragma unroll
    for (int i = 0; i < kRPW; ++i) IO::store(tile + (crow + i) * K + lane * 4, S[i]);
  });
  if (kMath) {
    __syncthreads();  // s_o complete
    const int64_t at = int64_t(b) * a.H * K + h * K;
    gated_norm_late(s_o, a.og + at, a.norm_w, a.out + at, tid, lane);
  }
}

/// `flat` (see the top): the state bytes of `move` without the per-item structure.
struct FlatArgs {
  float* state;
  const int32_t* slots;  // [B] of this step
  int H, items;
};
__global__ void __launch_bounds__(kThreads) flat_kernel(const __grid_constant__ FlatArgs a) {
  constexpr int kU = 4;                // 16-byte pieces in flight per thread
  constexpr int64_t kPer = kTile / 4;  // float4 per item
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  const int64_t total = int64_t(a.items) * kPer, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i0 < total; i0 += kU * stride) {
    float4* t[kU];
    float4 v[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = i0 + u * stride;
      t[u] = nullptr;
      if (i < total) {
        const int it = int(i / kPer);
        t[u] = reinterpret_cast<float4*>(a.state + (int64_t(a.slots[it / a.H]) * a.H + it % a.H) * kTile) + i % kPer;
        v[u] = *t[u];
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (t[u]) {
        v[u].x *= 0.999f, v[u].y *= 0.999f, v[u].z *= 0.999f, v[u].w *= 0.999f;
        *t[u] = v[u];
      }
  }
}

// ---- CPU reference of one delta-rule token of `rows` on an item's state (fp32, the kernel's
// operation order per row): S the state after it, u per row, o = S·q before the norm ----------
void token_raw(const float* S0, const float* p, float* S, float* u_out, float* o) {
  const float *k = p, *q = p + K, *e = p + 2 * K, *v = p + 3 * K;
  const float beta = p[4 * K], kq = p[4 * K + 1];
  for (int r = 0; r < K; ++r) {
    double a = 0, bq = 0;
    for (int c = 0; c < K; ++c) {
      const float x = S0[r * K + c] * e[c];
      S[r * K + c] = x;
      a += double(x) * k[c];
      bq += double(x) * q[c];
    }
    const float u = beta * (v[r] - float(a));
    for (int c = 0; c < K; ++c) S[r * K + c] = std::fmaf(u, k[c], S[r * K + c]);
    o[r] = float(bq) + u * kq;
    u_out[r] = u;
  }
}

// ---- CPU reference of `rows` for one item: the token, then the gated RMSNorm ----------------
void ref_item(const float* S0, const float* p, const float og_in, const float* nw, float* S, float* out,
              float* u_out = nullptr) {
  std::vector<float> o(K), u(K);
  token_raw(S0, p, S, u.data(), o.data());
  if (u_out) std::copy(u.begin(), u.end(), u_out);
  double ss = 0;
  for (int r = 0; r < K; ++r) ss += double(o[r]) * o[r];
  const float rn = float(1.0 / std::sqrt(ss / K + kEps));
  for (int r = 0; r < K; ++r) out[r] = o[r] * rn * nw[r] * og_in;
}

// ---- CPU reference of `arows` for one item: the fold of np records, S = fmaf(u, k, S·e) per
// element in record order (the kernel's operations), then `rows`' token from the folded state ----
void ref_append_item(const float* S0, const float* ru, const float* rkg, int np, const float* p, const float* nw,
                     float* Sf, float* S, float* u, float* out) {
  std::copy(S0, S0 + kTile, Sf);
  for (int pp = 0; pp < np; ++pp)
    for (int r = 0; r < K; ++r)
      for (int c = 0; c < K; ++c)
        Sf[r * K + c] =
            std::fmaf(ru[pp * K + r], rkg[pp * 2 * K + c], Sf[r * K + c] * kda::decay_of(rkg[pp * 2 * K + K + c]));
  ref_item(Sf, p, 1.f, nw, S, out, u);
}

float bf16f(uint16_t x) { return kda::bf16_to_f32(x); }

/// The bytes kda_bench counts for a step once (BENCHMARKS.md; its floor_bytes in gate modes 0 and
/// 1: f_a per request, F_B once per head): `state` bytes per item (the state, the records) plus
/// each item's window (W − 1 = 3 columns read, 2 + q written) and its q rows (q, k, v, out gate,
/// β, output).
double step_floor_bytes(int H, int B, int q, double state) {
  return double(H) * B * (state + 3.0 * K * (3 + (2 + q)) * 2 + q * (4.0 * K * 2 + 2 + K * 2)) + double(B) * q * K * 2 +
         double(H) * (double(K) * K * 2 + 3.0 * 4 * K * 4);
}

/// The same step's bytes in gate mode 2 (kda_bench's floor there; the own-bytes rungs'): the raw gate
/// per request instead of f_a, no F_B.
double step_floor_bytes_mode2(int H, int B, double state) {
  return step_floor_bytes(H, B, 1, state) - double(B) * K * 2 - double(H) * K * K * 2 + double(B) * H * K * 2;
}

/// µs per step of a graph of `steps` launches, `enqueue(i)` each (BENCHMARKS.md).
template <class Enqueue>
double step_us(cudaStream_t st, int steps, Enqueue&& enqueue) {
  return graph_replay_ms(st,
                         [&] {
                           for (int i = 0; i < steps; ++i) enqueue(i);
                         }) *
         1e3 / steps;
}

/// A rung table's header, and a rung's line: µs, the floor of the bytes it moves, × that floor,
/// % of the copy ceiling, × the floor of the step it stands for (`step_us`).
void rung_header(int width) {
  std::printf("%-*s %10s %12s %8s %9s %12s\n", width, "rung", "us/step", "floor us", "x", "%ceil", "x step floor");
}
void rung_line(int width, const char* name, double us, double bytes, double ceiling, double step_floor_us) {
  const double fl = bytes / ceiling * 1e6;
  std::printf("%-*s %10.2f %12.2f %8.3f %8.1f%% %12.3f\n", width, name, us, fl, fl > 0 ? us / fl : 0.0,
              100.0 * (bytes / (us * 1e-6)) / ceiling, us / step_floor_us);
}

/// The records rows of the append and fused rungs, R records per (slot, head): u [slots, H, R, K]
/// and k | g [slots, H, R, 2K], u ~ 0.1·N(0, 1), k ~ N(0, 1/K), g = −0.3·|N(0, 1)| (one slot's
/// worth drawn, copied to every slot).
struct RecordRows {
  float *u = nullptr, *kg = nullptr;
  int P;
  std::vector<float> u_h, kg_h;  // one slot's rows
  RecordRows(int P_, int H, int R, std::mt19937& rng) : P(P_), u_h(size_t(H) * R * K), kg_h(size_t(H) * R * 2 * K) {
    std::normal_distribution<float> n01(0.f, 1.f);
    for (auto& x : u_h) x = 0.1f * n01(rng);
    for (size_t i = 0; i < kg_h.size(); ++i)
      kg_h[i] = (i / K) % 2 == 0 ? n01(rng) / std::sqrt(float(K)) : -0.3f * std::fabs(n01(rng));
    CK(cudaMalloc(&u, size_t(P) * u_h.size() * 4));
    CK(cudaMalloc(&kg, size_t(P) * kg_h.size() * 4));
    reset();
  }
  /// Every slot's rows as drawn: a check runs on these, not on the records a check before it wrote
  /// (whose g slot holds e, so a later fold decays by exp(e) > 1 and its error grows past the bound).
  void reset() const {
    for (int sl = 0; sl < P; ++sl) {
      CK(cudaMemcpy(u + sl * u_h.size(), u_h.data(), u_h.size() * 4, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(kg + sl * kg_h.size(), kg_h.data(), kg_h.size() * 4, cudaMemcpyHostToDevice));
    }
  }
  RecordRows(const RecordRows&) = delete;
  ~RecordRows() {
    cudaFree(u);
    cudaFree(kg);
  }
};

/// The larger error, where a NaN (an output left poisoned, a state gone wrong) is the largest:
/// std::max would drop it.
double worse(double worst, double e) { return std::isnan(e) || e > worst ? e : worst; }

/// The decode step's inputs beside the state, per step (N steps: [N, B, ...]), for the own-bytes rungs.
struct IOBufs {
  const uint16_t* qkv;   // [N, B, 3D]
  const uint16_t* og;    // [N, B, D]
  const uint16_t* gate;  // [N, B, D] (the raw gate, gate mode 2)
  const uint16_t* beta;  // [N, B, H]
  uint16_t* conv;        // [slots, 3, 3D] (SD windows)
};

/// Step i's arguments of the own-bytes rungs (its slots, inputs and outputs in the per-step buffers).
template <class StateT>
ArgsIOT<StateT> io_args_at(StateT* state, const int32_t* slots, const IOBufs& io, const float* nw, uint16_t* out, int H,
                           int B, int i) {
  const size_t D = size_t(H) * K;
  return {state,
          slots + size_t(i) * B,
          io.qkv + size_t(i) * B * 3 * D,
          io.og + size_t(i) * B * D,
          io.gate + size_t(i) * B * D,
          io.beta + size_t(i) * B * H,
          io.conv,
          nw,
          out + size_t(i) * B * D,
          H};
}

/// The bf16 rungs (`--bf16`): a bf16 copy of every slot's state, the check of `rows16` against
/// the CPU reference (the state as stored: within one bf16 rounding of the reference's, which sums
/// its dots in another order), then move16 / rows16 / rows16/4 / rows16c4 and the own-bytes forms
/// rows16io / rows16io/4 (`rowsio` with bf16 state: six CTAs per SM, two stages / every chunk in
/// flight; timing only) with, beside each, the floor of kda_bench's bf16 decode step (its bytes,
/// gate modes 0 / 1). Returns the failed checks.
int bf16_rungs(int H, int B, int N, int P, double ceiling, cudaStream_t st, const int32_t* slots,
               const std::vector<int32_t>& slots_h, const float* prep, const std::vector<float>& prep_h,
               const uint16_t* og, const std::vector<uint16_t>& og_h, uint16_t* out, const float* nw,
               const std::vector<float>& nw_h, const IOBufs& io) {
  const int D = H * K, items = H * B;
  std::mt19937 rng(17);
  std::normal_distribution<float> n01(0.f, 1.f);
  uint16_t* state;
  CK(cudaMalloc(&state, size_t(P) * H * kTile * 2));
  {
    std::vector<uint16_t> hs(size_t(H) * kTile);
    for (auto& x : hs) x = kda::f32_to_bf16(0.05f * n01(rng));
    for (int sl = 0; sl < P; ++sl)
      CK(cudaMemcpy(state + size_t(sl) * H * kTile, hs.data(), hs.size() * 2, cudaMemcpyHostToDevice));
  }
  auto args = [&](int i) { return row_args(state, slots, prep, og, nw, out, H, B, i); };
  struct Form {
    const char* name;
    void (*fn)(Args16);
    int stages;
    bool math;
  };
  const Form forms[] = {{"move16", rows16_kernel<false, 6, 2>, 2, false},
                        {"rows16", rows16_kernel<true, 6, 2>, 2, true},
                        {"rows16/4", rows16_kernel<true, 6, 4>, 4, true},
                        {"rows16c4", rows16_kernel<true, 4, 2>, 2, true}};
  auto smem_of = [](int stages) { return kStateOff + stages * kStageBytes16; };
  for (const Form& f : forms)
    CK(cudaFuncSetAttribute(f.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(f.stages)));

  // ---- check rows16 on a sample of step 0's items ---------------------------------------------
  int failed = 0;
  {
    const int sample = std::min(items, 64);
    std::vector<int> picked(sample);
    for (int j = 0; j < sample; ++j) picked[j] = int((int64_t(j) * 7919) % items);
    auto tile_of = [&](int it) { return state + (int64_t(slots_h[it / H]) * H + it % H) * kTile; };
    std::vector<uint16_t> before(size_t(sample) * kTile), after(kTile);
    for (int j = 0; j < sample; ++j)
      CK(cudaMemcpy(before.data() + size_t(j) * kTile, tile_of(picked[j]), kTile * 2, cudaMemcpyDeviceToHost));
    const Form& f = forms[1];
    CK(cudaMemset(out, 0xff, size_t(B) * D * 2));  // poisoned (bf16 NaN): every output must be written
    f.fn<<<items, kThreads, smem_of(f.stages)>>>(args(0));
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> out_h(size_t(B) * D);
    CK(cudaMemcpy(out_h.data(), out, out_h.size() * 2, cudaMemcpyDeviceToHost));
    double worst_s = 0, worst_o = 0;
    std::vector<float> S0(kTile), S(kTile), outr(K);
    for (int j = 0; j < sample; ++j) {
      const int it = picked[j], b = it / H, h = it % H;
      for (int i = 0; i < kTile; ++i) S0[i] = bf16f(before[size_t(j) * kTile + i]);
      ref_item(S0.data(), prep_h.data() + size_t(it) * kPrep, 1.f, nw_h.data(), S.data(), outr.data());
      CK(cudaMemcpy(after.data(), tile_of(it), kTile * 2, cudaMemcpyDeviceToHost));
      // within one rounding: |stored − S| <= 2^-8·|S| (+ a floor for values near 0)
      for (int i = 0; i < kTile; ++i)
        worst_s = worse(worst_s, std::fabs(double(bf16f(after[i])) - S[i]) / (std::fabs(S[i]) * 0x1p-8 + 1e-6));
      for (int r = 0; r < K; ++r) {
        const float ogv = 1.f / (1.f + std::exp(-bf16f(og_h[size_t(b) * D + h * K + r])));
        const float got = bf16f(out_h[size_t(b) * D + h * K + r]);
        worst_o = worse(worst_o, double(std::fabs(outr[r] * ogv - got)) / (std::fabs(outr[r] * ogv) + 1e-2));
      }
    }
    const bool ok = worst_s <= 1.0 && worst_o < 1e-2;
    std::printf(
        "# check rows16 (%d items): state max |err| / (2^-8 |ref|) = %.2f (<= 1), out max rel err = %.2e "
        "(bf16: < 1e-2) -> %s\n",
        sample, worst_s, worst_o, ok ? "PASS" : "FAIL");
    failed += !ok;
  }

  // ---- the rungs ------------------------------------------------------------------------------
  const double tile = kTile * 2.0;
  const double step_fl = step_floor_bytes(H, B, 1, 2 * tile) / ceiling * 1e6;
  std::printf("# bf16 decode step floor (kda_bench's bytes, gate modes 0 / 1): %.2f us\n", step_fl);
  rung_header(9);
  for (const Form& f : forms) {
    const int smem = smem_of(f.stages);
    const double us =
        step_us(st, N, [&](int i) { launch_pdl(f.fn, dim3(unsigned(items)), kThreads, size_t(smem), st, args(i)); });
    rung_line(9, f.name, us, double(items) * (2 * tile + (f.math ? kPrepBytes + K * 2.0 + K * 2.0 : 0.0)), ceiling,
              step_fl);
  }
  // the own-bytes forms: gate mode 2's bytes (the raw gate per request, no F_B, no f_a)
  struct FormIO {
    const char* name;
    void (*fn)(ArgsIOT<uint16_t>);
    int stages;
  };
  const FormIO io_forms[] = {{"rows16io", rows_io_kernel<true, 2, 6, uint16_t>, 2},
                             {"rows16io/4", rows_io_kernel<true, 4, 6, uint16_t>, 4}};
  const double io_bytes = step_floor_bytes_mode2(H, B, 2 * tile);
  for (const FormIO& f : io_forms) {
    const int smem = f.stages * kStageBytes16;
    CK(cudaFuncSetAttribute(f.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const double us = step_us(st, N, [&](int i) {
      launch_pdl(f.fn, dim3(unsigned(items)), kThreads, size_t(smem), st,
                 io_args_at(state, slots, io, nw, out, H, B, i));
    });
    rung_line(9, f.name, us, io_bytes, ceiling, step_fl);
  }
  CK(cudaFree(state));
  return failed;
}

/// The fused rungs (`--fused`): their records, the check of each `frows` form against the CPU
/// reference (the fold written back, then the tokens from it), then the rungs with, beside each,
/// the floor of kda_bench's fused step at q = pending = 4 (its bytes: BENCHMARKS.md).
/// Returns the number of failed checks.
int fused_rungs(int H, int B, int N, int P, double ceiling, cudaStream_t st, float* state, const int32_t* slots,
                const std::vector<int32_t>& slots_h, const std::vector<float>& prep_h) {
  constexpr int Q = 4;
  const int items = H * B;
  std::mt19937 rng(13);
  // each token of an item takes the item's prepared vectors (as rows/q4)
  std::vector<float> pq(size_t(N) * items * Q * kPrep);
  for (size_t it = 0; it < size_t(N) * items; ++it)
    for (int t = 0; t < Q; ++t)
      std::copy(prep_h.begin() + it * kPrep, prep_h.begin() + (it + 1) * kPrep, pq.begin() + (it * Q + t) * kPrep);
  float* prepq;
  CK(cudaMalloc(&prepq, pq.size() * 4));
  CK(cudaMemcpy(prepq, pq.data(), pq.size() * 4, cudaMemcpyHostToDevice));
  const RecordRows recs(P, H, Q, rng);
  float *ru = recs.u, *rkg = recs.kg;
  uint16_t* outq;
  CK(cudaMalloc(&outq, size_t(N) * items * Q * K * 2));
  auto args = [&](int i) {
    return ArgsR{state,
                 slots + size_t(i) * B,
                 prepq + size_t(i) * items * Q * kPrep,
                 ru,
                 rkg,
                 nullptr,
                 nullptr,
                 outq + size_t(i) * items * Q * K,
                 H,
                 Q,
                 Q,
                 0,
                 1};
  };
  struct Form {
    const char* name;
    void (*fn)(ArgsR);
    int stages;
    bool math;
  };
  const Form forms[] = {{"frows5/q4", staged_rows_kernel<Q, true, 5, 1>, 1, true},
                        {"frows4/q4", staged_rows_kernel<Q, true, 4, 2>, 2, true},
                        {"frows2/q4", staged_rows_kernel<Q, true, 2, 4>, 4, true},
                        {"fmove/q4", staged_rows_kernel<Q, false, 2, 4>, 4, false}};
  auto smem_of = [](int stages) { return staged_state_off(Q, Q) + stages * kStageBytes; };
  for (const Form& f : forms)
    CK(cudaFuncSetAttribute(f.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(f.stages)));

  // ---- checks: the checkpoint (the fold of the Q records), each token's u and bf16(o) ----------
  int failed = 0;
  const int sample = std::min(items, 64);
  for (const Form& f : forms) {
    if (!f.math) continue;
    recs.reset();
    std::vector<int> picked(sample);
    for (int j = 0; j < sample; ++j) picked[j] = int((int64_t(j) * 7919) % items);
    auto row_of = [&](int it) { return int64_t(slots_h[it / H]) * H + it % H; };
    std::vector<float> s0(size_t(sample) * kTile), u0(size_t(sample) * Q * K), kg0(size_t(sample) * Q * 2 * K);
    for (int j = 0; j < sample; ++j) {
      const int64_t r = row_of(picked[j]);
      CK(cudaMemcpy(s0.data() + size_t(j) * kTile, state + r * kTile, kTile * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(u0.data() + size_t(j) * Q * K, ru + r * Q * K, Q * K * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(kg0.data() + size_t(j) * Q * 2 * K, rkg + r * Q * 2 * K, Q * 2 * K * 4, cudaMemcpyDeviceToHost));
    }
    CK(cudaMemset(outq, 0xff, size_t(items) * Q * K * 2));  // poisoned (bf16 NaN): every output must be written
    f.fn<<<items, kThreads, smem_of(f.stages)>>>(args(0));
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> out_h(size_t(items) * Q * K);
    CK(cudaMemcpy(out_h.data(), outq, out_h.size() * 2, cudaMemcpyDeviceToHost));
    double worst_s = 0, worst_u = 0, worst_o = 0;
    long kg_wrong = 0;
    std::vector<float> Sf(kTile), S(kTile), S2(kTile), after(kTile), u(K), o(K), ug(Q * K), kgg(Q * 2 * K), nw1(K, 1.f);
    for (int j = 0; j < sample; ++j) {
      const int it = picked[j];
      const int64_t r = row_of(it);
      const float* p = prep_h.data() + size_t(it) * kPrep;
      // the fold (the checkpoint), then the Q tokens from it; o without the norm (nw = 1, og = 1:
      // ref_item's o before the norm is recovered from its u path below)
      ref_append_item(s0.data() + size_t(j) * kTile, u0.data() + size_t(j) * Q * K, kg0.data() + size_t(j) * Q * 2 * K,
                      Q, p, nw1.data(), Sf.data(), S.data(), u.data(), o.data());
      CK(cudaMemcpy(after.data(), state + r * kTile, kTile * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(ug.data(), ru + r * Q * K, Q * K * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(kgg.data(), rkg + r * Q * 2 * K, Q * 2 * K * 4, cudaMemcpyDeviceToHost));
      for (int i = 0; i < kTile; ++i)
        worst_s = worse(worst_s, std::fabs(double(Sf[i]) - after[i]) / (std::fabs(Sf[i]) + 1e-2));
      // the tokens: each from the state the previous one left (the prepared vectors are the item's)
      std::copy(Sf.begin(), Sf.end(), S2.begin());
      for (int t = 0; t < Q; ++t) {
        std::vector<float> raw(K);
        token_raw(S2.data(), p, S.data(), u.data(), raw.data());
        std::copy(S.begin(), S.end(), S2.begin());
        for (int v = 0; v < K; ++v) {
          worst_u = worse(worst_u, std::fabs(double(u[v]) - ug[t * K + v]) / (std::fabs(u[v]) + 1e-2));
          const float got = bf16f(out_h[(size_t(it) * Q + t) * K + v]);
          worst_o = worse(worst_o, double(std::fabs(raw[v] - got)) / (std::fabs(raw[v]) + 1e-2));
        }
        for (int c = 0; c < K; ++c) kg_wrong += kgg[t * 2 * K + c] != p[c] || kgg[t * 2 * K + K + c] != p[2 * K + c];
      }
    }
    const bool ok = worst_s < 1e-4 && worst_u < 1e-3 && worst_o < 1e-2 && kg_wrong == 0;
    std::printf(
        "# check %s (%d items): checkpoint max rel err %.2e, u max rel err %.2e, o max rel err %.2e, "
        "records k|g wrong %ld -> %s\n",
        f.name, sample, worst_s, worst_u, worst_o, kg_wrong, ok ? "PASS" : "FAIL");
    failed += !ok;
  }

  // ---- the rungs: N steps on disjoint slots (BENCHMARKS.md) -----------------------------------
  const double tile = K * K * 4.0, rec = 3.0 * K * 4;
  const double step_fl = step_floor_bytes(H, B, Q, 2 * tile + 2 * Q * rec) / ceiling * 1e6;  // pending = q
  std::printf("# fused step floor (kda_bench's bytes, q = pending = 4): %.2f us\n", step_fl);
  rung_header(9);
  for (const Form& f : forms) {
    const int smem = smem_of(f.stages);
    const double us =
        step_us(st, N, [&](int i) { launch_pdl(f.fn, dim3(unsigned(items)), kThreads, size_t(smem), st, args(i)); });
    // the checkpoint read and written, Q records read and Q written, the prepared vectors, bf16(o)
    rung_line(9, f.name, us, double(items) * (2 * tile + 2 * Q * rec + Q * (kPrepBytes + K * 2.0)), ceiling, step_fl);
  }
  CK(cudaFree(prepq));
  CK(cudaFree(outq));
  return failed;
}

/// The append rungs (`--append`): their records, the checks of `arows` at a full and a partial
/// row against the CPU reference, then arows / amove for Qr = 8 and 16 with, beside each, the
/// floor of kda_bench's append step at the same H, B and Qr (its bytes: BENCHMARKS.md).
/// Returns the number of failed checks.
int append_rungs(int H, int B, int N, int P, double ceiling, cudaStream_t st, float* state, const int32_t* slots,
                 const std::vector<int32_t>& slots_h, const float* prep, const std::vector<float>& prep_h,
                 const uint16_t* og, const std::vector<uint16_t>& og_h, uint16_t* out, const float* nw,
                 const std::vector<float>& nw_h) {
  constexpr int kQrMax = 16;
  const int D = H * K, items = H * B;
  std::mt19937 rng(11);
  // (a rung of Qr < kQrMax reads each slot's [H][Qr][…] rows from the start of its space)
  const RecordRows recs(P, H, kQrMax, rng);
  float *ru = recs.u, *rkg = recs.kg;
  // cycle position: npend = Qr (a full row: the fold written back, the record at 0) or j > 0
  auto args = [&](int i, int Qr, int npend) {
    const bool full_row = npend == Qr;
    return ArgsR{state,
                 slots + size_t(i) * B,
                 prep + size_t(i) * items * kPrep,
                 ru,
                 rkg,
                 og + size_t(i) * B * D,
                 nw,
                 out + size_t(i) * B * D,
                 H,
                 Qr,
                 npend,
                 full_row ? 0 : npend,
                 full_row ? 1 : 0};
  };
  auto smem_of = [](int Qr, int stages) { return staged_state_off(1, Qr) + stages * kStageBytes; };
  struct Form {
    const char* name;
    void (*fn)(ArgsR);
    int Qr, stages;
  };
  const Form forms[] = {
      {"arows/8", staged_rows_kernel<1, true, 6, 1>, 8, 1},     {"arows4/8", staged_rows_kernel<1, true, 4, 2>, 8, 2},
      {"amove/8", staged_rows_kernel<1, false, 6, 1>, 8, 1},    {"arows/16", staged_rows_kernel<1, true, 4, 1>, 16, 1},
      {"amove/16", staged_rows_kernel<1, false, 4, 1>, 16, 1},  {"arows5/16", staged_rows_kernel<1, true, 5, 1>, 16, 1},
      {"amove5/16", staged_rows_kernel<1, false, 5, 1>, 16, 1},
  };
  for (const Form& f : forms)
    CK(cudaFuncSetAttribute(f.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_of(f.Qr, f.stages)));

  // ---- checks: arows at a full row (npend = Qr: the fold written back, the record at 0) and a
  //      partial one (npend = 3: the checkpoint untouched, bitwise), Qr = 8 and 16 -------------
  int failed = 0;
  const int sample = std::min(items, 64);
  for (const Form& f : forms) {
    if (f.name[1] != 'r') continue;  // arows only
    for (const int np : {f.Qr, 3}) {
      recs.reset();
      std::vector<int> picked(sample);
      for (int j = 0; j < sample; ++j) picked[j] = int((int64_t(j) * 7919) % items);
      auto row_of = [&](int it) { return int64_t(slots_h[it / H]) * H + it % H; };
      std::vector<float> s0(size_t(sample) * kTile), u0(size_t(sample) * f.Qr * K), kg0(size_t(sample) * f.Qr * 2 * K);
      for (int j = 0; j < sample; ++j) {
        const int64_t r = row_of(picked[j]);
        CK(cudaMemcpy(s0.data() + size_t(j) * kTile, state + r * kTile, kTile * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(u0.data() + size_t(j) * f.Qr * K, ru + r * f.Qr * K, f.Qr * K * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(kg0.data() + size_t(j) * f.Qr * 2 * K, rkg + r * f.Qr * 2 * K, f.Qr * 2 * K * 4,
                      cudaMemcpyDeviceToHost));
      }
      CK(cudaMemset(out, 0xff, size_t(B) * D * 2));  // poisoned (bf16 NaN): every output must be written
      f.fn<<<items, kThreads, smem_of(f.Qr, f.stages)>>>(args(0, f.Qr, np));
      CK(cudaDeviceSynchronize());
      std::vector<uint16_t> out_h(size_t(B) * D);
      CK(cudaMemcpy(out_h.data(), out, out_h.size() * 2, cudaMemcpyDeviceToHost));
      const int pos0 = np == f.Qr ? 0 : np;
      double worst_s = 0, worst_u = 0, worst_o = 0;
      long kg_wrong = 0;
      std::vector<float> Sf(kTile), S(kTile), after(kTile), u(K), o(K), ug(K), kgg(2 * K);
      for (int j = 0; j < sample; ++j) {
        const int it = picked[j], b = it / H, h = it % H;
        const int64_t r = row_of(it);
        ref_append_item(s0.data() + size_t(j) * kTile, u0.data() + size_t(j) * f.Qr * K,
                        kg0.data() + size_t(j) * f.Qr * 2 * K, np, prep_h.data() + size_t(it) * kPrep, nw_h.data(),
                        Sf.data(), S.data(), u.data(), o.data());
        CK(cudaMemcpy(after.data(), state + r * kTile, kTile * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ug.data(), ru + (r * f.Qr + pos0) * K, K * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(kgg.data(), rkg + (r * f.Qr + pos0) * 2 * K, 2 * K * 4, cudaMemcpyDeviceToHost));
        const float* want = np == f.Qr ? Sf.data() : s0.data() + size_t(j) * kTile;
        for (int i = 0; i < kTile; ++i) {
          const double e = std::fabs(double(want[i]) - after[i]);
          worst_s = worse(worst_s, np == f.Qr ? e / (std::fabs(want[i]) + 1e-2) : (want[i] != after[i] ? 1.0 : 0.0));
        }
        for (int v = 0; v < K; ++v) {
          worst_u = worse(worst_u, std::fabs(double(u[v]) - ug[v]) / (std::fabs(u[v]) + 1e-2));
          const float ogv = 1.f / (1.f + std::exp(-bf16f(og_h[size_t(b) * D + h * K + v])));
          const float got = bf16f(out_h[size_t(b) * D + h * K + v]);
          worst_o = worse(worst_o, double(std::fabs(o[v] * ogv - got)) / (std::fabs(o[v] * ogv) + 1e-2));
        }
        const float* pv = prep_h.data() + size_t(it) * kPrep;
        for (int c = 0; c < K; ++c) kg_wrong += kgg[c] != pv[c] || kgg[K + c] != pv[2 * K + c];
      }
      const bool ok = worst_s < 1e-4 && worst_u < 1e-3 && worst_o < 1e-2 && kg_wrong == 0;
      std::printf(
          "# check %s, %d pending (%d items): state %s %.2e, u max rel err %.2e, out max rel err %.2e, "
          "record k|g wrong %ld -> %s\n",
          f.name, np, sample, np == f.Qr ? "(written back) max rel err" : "(untouched) bits differ", worst_s, worst_u,
          worst_o, kg_wrong, ok ? "PASS" : "FAIL");
      failed += !ok;
    }
  }

  // ---- the rungs: N groups of B slots, each through a whole cycle of Qr steps (the steps of a
  //      cycle N apart in the graph, as kda_bench's append timing) ----------------------------
  auto step_floor = [&](int Qr) {  // kda_bench's append step, averaged over the cycle
    const double tile = K * K * 4.0, rec = 3.0 * K * 4;
    return step_floor_bytes(H, B, 1, tile + tile / Qr + rec * (1 + (Qr + 1) / 2.0)) / ceiling * 1e6;
  };
  std::printf("# append step floor (kda_bench's bytes): Qr = 8 %.1f us, Qr = 16 %.1f us\n", step_floor(8),
              step_floor(16));
  rung_header(8);
  for (const Form& f : forms) {
    const int smem = smem_of(f.Qr, f.stages);
    const double us = step_us(st, N * f.Qr, [&](int i) {
      const int j = i / N;
      launch_pdl(f.fn, dim3(unsigned(items)), kThreads, size_t(smem), st, args(i % N, f.Qr, j == 0 ? f.Qr : j));
    });
    // per step on average: the checkpoint read, written back once a cycle, (Qr + 1) / 2 records
    // read, one written, the prepared vectors; the out gate and the output (arows)
    const double per_item = kTile * 4.0 * (1 + 1.0 / f.Qr) + 3.0 * K * 4 * ((f.Qr + 1) / 2.0 + 1) + kPrepBytes +
                            (f.name[1] == 'r' ? K * 2 + K * 2 : 0);
    rung_line(8, f.name, us, double(items) * per_item, ceiling, step_floor(f.Qr));
  }
  return failed;
}

int main(int argc, char** argv) {
  // positional H B; a trailing "--csv FILE" (scripts/gpu_run.sh ladder stage) is skipped: the
  // table goes to stdout, which the stage keeps as ladder_<name>_<i>.txt
  std::vector<int> pos;
  bool floors = false;  // --floors: the data-movement rungs only
  bool append = false;  // --append: the append rungs only
  bool fused = false;   // --fused: the fused rungs only
  bool bf16 = false;    // --bf16: the bf16 rungs only
  bool io = false;      // --io: move, rows, moveio, rowsio, rowsio/1 only
  int sms = 0;          // --sms N: the timed rungs on a green context of N SMs (0: the whole device)
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--csv") {
      ++i;
      continue;
    }
    if (arg == "--sms" && i + 1 < argc) {
      sms = std::atoi(argv[++i]);
      continue;
    }
    bool* flag = arg == "--floors"   ? &floors
                 : arg == "--append" ? &append
                 : arg == "--fused"  ? &fused
                 : arg == "--bf16"   ? &bf16
                 : arg == "--io"     ? &io
                                     : nullptr;
    if (flag)
      *flag = true;
    else
      pos.push_back(std::atoi(argv[i]));
  }
  const int H = pos.size() >= 2 ? pos[0] : 96, B = pos.size() >= 2 ? pos[1] : 256;
  const int D = H * K, items = H * B;
  const int N = std::max(4, std::min(64, int(std::ceil(400e6 / (double(B) * H * 65536)))));
  const int P = B * N + 1;
  std::printf("# rows_prepared: H = %d, B = %d, %d steps per graph, pool %d slots (%.1f GB)\n", H, B, N, P,
              double(P) * H * kTile * 4 / 1e9);
  std::mt19937 rng(7);
  std::normal_distribution<float> n01(0.f, 1.f);
  // device buffers
  float* state;
  CK(cudaMalloc(&state, size_t(P) * H * kTile * 4));
  {
    std::vector<float> h(size_t(H) * kTile);
    for (auto& x : h) x = 0.05f * n01(rng);
    for (int s = 0; s < P; ++s)
      CK(cudaMemcpy(state + size_t(s) * H * kTile, h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  }
  std::vector<int32_t> slots_h(size_t(N) * B);
  {
    std::vector<int32_t> perm(P - 1);
    for (int i = 0; i < P - 1; ++i) perm[i] = i + 1;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (size_t i = 0; i < slots_h.size(); ++i) slots_h[i] = perm[i];
  }
  int32_t* slots;
  CK(cudaMalloc(&slots, slots_h.size() * 4));
  CK(cudaMemcpy(slots, slots_h.data(), slots_h.size() * 4, cudaMemcpyHostToDevice));
  // prepared vectors as the prologue kernel would leave them: unit k̂, q̂·K^-1/2, e in (0, 1]
  std::vector<float> prep_h(size_t(N) * items * kPrep, 0.f);
  for (size_t it = 0; it < size_t(N) * items; ++it) {
    float* p = prep_h.data() + it * kPrep;
    double nk = 0, nq = 0;
    for (int c = 0; c < K; ++c)
      p[c] = n01(rng), p[K + c] = n01(rng), nk += double(p[c]) * p[c], nq += double(p[K + c]) * p[K + c];
    double kq = 0;
    for (int c = 0; c < K; ++c) {
      p[c] = float(p[c] / std::sqrt(nk));
      p[K + c] = float(p[K + c] / std::sqrt(nq) / std::sqrt(double(K)));
      kq += double(p[c]) * p[K + c];
      p[2 * K + c] = std::exp(-0.3f * std::fabs(n01(rng)));
      p[3 * K + c] = n01(rng);
    }
    p[4 * K] = 1.f / (1.f + std::exp(-n01(rng)));
    p[4 * K + 1] = float(kq);
  }
  float* prep;
  CK(cudaMalloc(&prep, prep_h.size() * 4));
  CK(cudaMemcpy(prep, prep_h.data(), prep_h.size() * 4, cudaMemcpyHostToDevice));
  std::vector<uint16_t> og_h(size_t(N) * B * D);
  for (auto& x : og_h) x = kda::f32_to_bf16(n01(rng));
  uint16_t *og, *out;
  CK(cudaMalloc(&og, og_h.size() * 2));
  CK(cudaMemcpy(og, og_h.data(), og_h.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&out, size_t(N) * B * D * 2));
  std::vector<float> nw_h(K);
  for (auto& x : nw_h) x = 1.f + 0.2f * n01(rng);
  float* nw;
  CK(cudaMalloc(&nw, K * 4));
  CK(cudaMemcpy(nw, nw_h.data(), K * 4, cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(rows_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CK(cudaFuncSetAttribute(rows_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  auto args = [&](int i) { return row_args(state, slots, prep, og, nw, out, H, B, i); };

  // rows/S: the kernels, their shared memory (the prepared vectors, then every chunk of the rank's rows)
  void (*const split_fns[])(Args) = {rows_split_kernel<1>,   rows_split_kernel<2>,    rows_split_kernel<4>,
                                     rows_split_kernel<8>,   rows_split_kernel<2, 2>, rows_split_kernel<4, 2>,
                                     rows_split_kernel<8, 2>};
  constexpr int kSplitFns = 7;
  const int split_s[] = {1, 2, 4, 8, 2, 4, 8};
  const char* split_names[] = {"rows/1", "rows/2", "rows/4", "rows/8", "rowsa/2", "rowsa/4", "rowsa/8"};
  auto split_smem = [](int S) { return kStateOff + (K / S) * K * 4; };
  for (int f = 0; f < kSplitFns; ++f)
    CK(cudaFuncSetAttribute(split_fns[f], cudaFuncAttributeMaxDynamicSharedMemorySize, split_smem(split_s[f])));
  auto launch_split = [&](int f, int i, cudaStream_t s) {
    const int S = split_s[f];
    launch_pdl(split_fns[f], dim3(unsigned(items * S)), kThreads, size_t(split_smem(S)), s, args(i), S);
  };

  int failed = 0;  // checks that failed: the exit status, after the timings
  // ---- check `rows` and rows/S on a sample of step 0's items against the CPU reference ----
  auto check_rows = [&](const char* name, auto&& launch) {
    const int sample = std::min(items, 64);
    std::vector<float> before(size_t(sample) * kTile), after(size_t(sample) * kTile);
    std::vector<int> picked(sample);
    for (int j = 0; j < sample; ++j) picked[j] = int((int64_t(j) * 7919) % items);
    auto tile_of = [&](int it) { return state + (int64_t(slots_h[it / H]) * H + it % H) * kTile; };
    for (int j = 0; j < sample; ++j)
      CK(cudaMemcpy(before.data() + size_t(j) * kTile, tile_of(picked[j]), kTile * 4, cudaMemcpyDeviceToHost));
    launch();
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> out_h(size_t(B) * D);
    CK(cudaMemcpy(out_h.data(), out, out_h.size() * 2, cudaMemcpyDeviceToHost));
    double worst_s = 0, worst_o = 0;
    std::vector<float> S(kTile);
    for (int j = 0; j < sample; ++j) {
      const int it = picked[j], b = it / H, h = it % H;
      CK(cudaMemcpy(after.data() + size_t(j) * kTile, tile_of(it), kTile * 4, cudaMemcpyDeviceToHost));
      std::vector<float> outr(K);  // without the out gate; applied per row below, in the kernel's order
      const float* p = prep_h.data() + size_t(it) * kPrep;
      ref_item(before.data() + size_t(j) * kTile, p, 1.f, nw_h.data(), S.data(), outr.data());
      for (int i = 0; i < kTile; ++i)
        worst_s = worse(worst_s, double(std::fabs(S[i] - after[size_t(j) * kTile + i])) / 0.05);
      for (int r = 0; r < K; ++r) {
        const float ogv = 1.f / (1.f + std::exp(-bf16f(og_h[size_t(b) * D + h * K + r])));
        const float got = bf16f(out_h[size_t(b) * D + h * K + r]);
        worst_o = worse(worst_o, double(std::fabs(outr[r] * ogv - got)) / (std::fabs(outr[r] * ogv) + 1e-2));
      }
    }
    std::printf("# check %s (%d items): state max |err| / 0.05 = %.2e, out max rel err = %.2e (bf16: < 1e-2) -> %s\n",
                name, sample, worst_s, worst_o, worst_s < 1e-4 && worst_o < 1e-2 ? "PASS" : "FAIL");
    failed += !(worst_s < 1e-4 && worst_o < 1e-2);
  };
  check_rows("rows", [&] { rows_kernel<true><<<items, kThreads, kSmem>>>(args(0)); });
  for (int f = 0; f < kSplitFns; ++f) check_rows(split_names[f], [&] { launch_split(f, 0, nullptr); });

  // ---- the prologue's inputs and weights; check `prep` on a sample of step 0's items -----
  std::vector<uint16_t> qkv_h(size_t(N) * B * 3 * D), fa_h(size_t(N) * B * K), beta_h(size_t(N) * B * H);
  for (auto& x : qkv_h) x = kda::f32_to_bf16(n01(rng));
  for (auto& x : fa_h) x = kda::f32_to_bf16(n01(rng));
  for (auto& x : beta_h) x = kda::f32_to_bf16(n01(rng));
  std::vector<uint16_t> conv_h(size_t(P) * 3 * D * 3), fb_h(size_t(D) * K);
  for (auto& x : conv_h) x = kda::f32_to_bf16(n01(rng));
  for (auto& x : fb_h) x = kda::f32_to_bf16(0.08f * n01(rng));
  std::vector<float> cw_h(size_t(3) * 4 * D), alog_h(H), dtb_h(D);
  for (auto& x : cw_h) x = 0.4f * n01(rng);
  for (auto& x : alog_h) x = 0.5f * n01(rng);
  for (auto& x : dtb_h) x = 0.5f * n01(rng);
  auto put = [](const auto& v) {
    void* d;
    CK(cudaMalloc(&d, v.size() * sizeof(v[0])));
    CK(cudaMemcpy(d, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice));
    return d;
  };
  auto* qkv = static_cast<uint16_t*>(put(qkv_h));
  auto* fa = static_cast<uint16_t*>(put(fa_h));
  auto* beta_d = static_cast<uint16_t*>(put(beta_h));
  auto* conv = static_cast<uint16_t*>(put(conv_h));
  auto* fb = static_cast<uint16_t*>(put(fb_h));
  auto* cw = static_cast<float*>(put(cw_h));
  auto* alog = static_cast<float*>(put(alog_h));
  auto* dtb = static_cast<float*>(put(dtb_h));
  CK(cudaFuncSetAttribute(prep_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kPrepSmem));
  auto prep_args = [&](int i) {
    return PrepArgs{qkv + size_t(i) * B * 3 * D,
                    fa + size_t(i) * B * K,
                    beta_d + size_t(i) * B * H,
                    slots + size_t(i) * B,
                    conv,
                    cw,
                    fb,
                    alog,
                    dtb,
                    prep + size_t(i) * items * kPrep,
                    H,
                    B};
  };
  const dim3 prep_grid(unsigned(H), unsigned((B + kRB - 1) / kRB));
  {
    prep_kernel<<<prep_grid, kThreads, kPrepSmem>>>(prep_args(0));
    CK(cudaDeviceSynchronize());
    std::vector<float> got(size_t(items) * kPrep);
    CK(cudaMemcpy(got.data(), prep, got.size() * 4, cudaMemcpyDeviceToHost));
    std::vector<uint16_t> conv_after(conv_h.size());
    CK(cudaMemcpy(conv_after.data(), conv, conv_after.size() * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    long bad_win = 0;
    const int sample = std::min(items, 64);
    for (int j = 0; j < sample; ++j) {
      const int it = int((int64_t(j) * 7919) % items), b = it / H, h = it % H, sl = slots_h[b];
      std::vector<float> y(3 * K);
      for (int c = 0; c < 3 * K; ++c) {
        const int g = c / K, ch = g * D + h * K + c % K;
        const uint16_t* w = conv_h.data() + (size_t(sl) * 3 * D + ch) * 3;
        const uint16_t xb = qkv_h[size_t(b) * 3 * D + ch];
        float acc = 0.f;
        for (int t = 0; t < 3; ++t) acc = std::fmaf(cw_h[size_t(g * 4 + t) * D + h * K + c % K], bf16f(w[t]), acc);
        acc = std::fmaf(cw_h[size_t(g * 4 + 3) * D + h * K + c % K], bf16f(xb), acc);
        y[c] = acc / (1.f + std::exp(-acc));
        const uint16_t* wa = conv_after.data() + (size_t(sl) * 3 * D + ch) * 3;
        bad_win += wa[0] != w[1] || wa[1] != w[2] || wa[2] != xb;
      }
      double sq = 0, sk = 0, sqk = 0;
      for (int c = 0; c < K; ++c)
        sq += double(y[c]) * y[c], sk += double(y[K + c]) * y[K + c], sqk += double(y[c]) * y[K + c];
      const double iq = 1 / std::sqrt(sq + kda::kL2Eps), ik = 1 / std::sqrt(sk + kda::kL2Eps);
      std::vector<double> want(kPrep, 0.0);
      for (int c = 0; c < K; ++c) {
        want[c] = y[K + c] * ik;
        want[K + c] = y[c] * iq * kda::kQScale;
        double z = 0;
        for (int r = 0; r < K; ++r)
          z += double(bf16f(fb_h[size_t(h * K + c) * K + r])) * bf16f(fa_h[size_t(b) * K + r]);
        const double av = std::exp(double(alog_h[h]));
        const double gz = kLowerBound / (1 + std::exp(-av * (z + dtb_h[h * K + c])));
        want[2 * K + c] = std::exp(gz);
        want[3 * K + c] = y[2 * K + c];
      }
      want[4 * K] = 1 / (1 + std::exp(-double(bf16f(beta_h[size_t(b) * H + h]))));
      want[4 * K + 1] = sqk * ik * iq * kda::kQScale;
      for (int i = 0; i < 4 * K + 2; ++i)
        worst = worse(worst, std::fabs(want[i] - got[size_t(it) * kPrep + i]) / (std::fabs(want[i]) + 1e-3));
    }
    std::printf("# check prep (%d items): max rel err %.2e, window columns wrong %ld -> %s\n", sample, worst, bad_win,
                worst < 1e-3 && bad_win == 0 ? "PASS" : "FAIL");
    failed += !(worst < 1e-3 && bad_win == 0);
  }

  // ---- the copy ceiling and the rungs ---------------------------------------------------
  const double ceiling = copy_ceiling();
  const double row_bytes = double(items) * (2.0 * kTile * 4 + kPrepBytes + K * 2 + K * 2);
  const double step_bytes = step_floor_bytes(H, B, 1, 2.0 * kTile * 4);
  std::printf("# copy ceiling %.0f GB/s; decode step floor %.1f us (kda_bench's bytes)\n", ceiling / 1e9,
              step_bytes / ceiling * 1e6);
  if (sms != 0)
    std::printf("# green context: the timed rungs on %d SMs (--sms %d); the ceiling and floors the whole device's\n",
                use_sm_partition(sms), sms);
  cudaStream_t st = make_stream();
  // the raw gate (gate mode 2) of the own-bytes rungs
  std::vector<uint16_t> gate_h(size_t(N) * B * D);
  for (auto& x : gate_h) x = kda::f32_to_bf16(n01(rng));
  auto* gate = static_cast<uint16_t*>(put(gate_h));
  const IOBufs io_bufs{qkv, og, gate, beta_d, conv};
  if (append || fused || bf16) {
    // (the check of `prep` above wrote step 0's prepared vectors from its own inputs: these rungs'
    // checks compare against prep_h)
    CK(cudaMemcpy(prep, prep_h.data(), prep_h.size() * 4, cudaMemcpyHostToDevice));
    const int rc =
        append  ? append_rungs(H, B, N, P, ceiling, st, state, slots, slots_h, prep, prep_h, og, og_h, out, nw, nw_h)
        : fused ? fused_rungs(H, B, N, P, ceiling, st, state, slots, slots_h, prep_h)
                : bf16_rungs(H, B, N, P, ceiling, st, slots, slots_h, prep, prep_h, og, og_h, out, nw, nw_h, io_bufs);
    if (failed + rc) std::fprintf(stderr, "rows_prepared: %d check(s) FAILED\n", failed + rc);
    return failed + rc ? 1 : 0;
  }
  rung_header(8);
  // one rung: N steps of `enqueue_step(i)` in a graph (BENCHMARKS.md), its line of the table
  auto rung = [&](const char* name, double bytes, auto&& enqueue_step) {
    rung_line(8, name, step_us(st, N, enqueue_step), bytes, ceiling, step_bytes / ceiling * 1e6);
  };
  // the prologue's bytes: windows read + written, its rows (q, k, v, beta, f_a), the prepared
  // vectors written, F_B once per CTA
  const double prep_bytes = double(items) * (2.0 * 3 * K * 3 * 2 + 3 * K * 2 + 2 + kPrepBytes) + double(B) * K * 2 +
                            double(H) * ((B + kRB - 1) / kRB) * K * K * 2;
  const char* names[] = {"move", "rows", "prep", "split"};
  for (int r = 0; r < (floors ? 1 : io ? 2 : 4); ++r) {
    const bool math = r == 1 || r == 3, with_prep = r >= 2, with_rows = r != 2;
    const double bytes = r == 0   ? double(items) * 2.0 * kTile * 4
                         : r == 1 ? row_bytes
                         : r == 2 ? prep_bytes
                                  : row_bytes + prep_bytes;
    rung(names[r], bytes, [&](int i) {
      if (with_prep) launch_pdl(prep_kernel, prep_grid, kThreads, kPrepSmem, st, prep_args(i));
      if (with_rows)
        launch_pdl(math ? rows_kernel<true> : rows_kernel<false>, dim3(unsigned(items)), kThreads, kSmem, st, args(i));
    });
  }
  // ---- rowsio / moveio: the decode step's exact bytes with a free prologue (timing only) --------
  {
    const int smem_io = kStages * kStageBytes;
    CK(cudaFuncSetAttribute(rows_io_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_io));
    CK(cudaFuncSetAttribute(rows_io_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_io));
    auto io_args = [&](int i) { return io_args_at(state, slots, io_bufs, nw, out, H, B, i); };
    const double io_bytes = step_floor_bytes_mode2(H, B, 2.0 * kTile * 4);
    for (int m = 0; m < 2; ++m)
      rung(m == 0 ? "moveio" : "rowsio", io_bytes, [&](int i) {
        launch_pdl(m == 0 ? rows_io_kernel<false> : rows_io_kernel<true>, dim3(unsigned(items)), kThreads,
                   size_t(smem_io), st, io_args(i));
      });
    // rowsio/1: every chunk in flight (rows/1's form, three CTAs per SM), the fastest row-work form from
    // 6144 items at the prepared bytes (by 0.15–0.5% over `rows` on the H200)
    const int smem_io1 = kChunks * kStageBytes;
    CK(cudaFuncSetAttribute(rows_io_kernel<true, kChunks, 3>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_io1));
    rung("rowsio/1", io_bytes, [&](int i) {
      launch_pdl(rows_io_kernel<true, kChunks, 3>, dim3(unsigned(items)), kThreads, size_t(smem_io1), st, io_args(i));
    });
  }
  CK(cudaFree(gate));
  if (io) {
    if (failed) std::fprintf(stderr, "rows_prepared: %d check(s) FAILED\n", failed);
    return failed ? 1 : 0;
  }
  // ---- rows/q4: the record step's row loop alone (timing only) --------------------------------
  if (!floors) {
    constexpr int Q = 4;
    const int smem = (Q * kPrepBytes + 127) / 128 * 128 + kStages * kStageBytes;
    CK(cudaFuncSetAttribute(rows_q_kernel<Q>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    // each token of an item takes the item's prepared vectors (the arithmetic, not the values, is timed)
    std::vector<float> pq(prep_h.size() * Q);
    for (size_t it = 0; it < size_t(N) * items; ++it)
      for (int t = 0; t < Q; ++t)
        std::copy(prep_h.begin() + it * kPrep, prep_h.begin() + (it + 1) * kPrep, pq.begin() + (it * Q + t) * kPrep);
    float *prepq, *rec;
    uint16_t* outq;
    CK(cudaMalloc(&prepq, pq.size() * 4));
    CK(cudaMemcpy(prepq, pq.data(), pq.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&rec, size_t(N) * items * Q * K * 4));
    CK(cudaMalloc(&outq, size_t(N) * items * Q * K * 2));
    rung("rows/q4", double(items) * (kTile * 4.0 + Q * (kPrepBytes + K * 4 + K * 2)), [&](int i) {
      const ArgsQ aq{state,
                     slots + size_t(i) * B,
                     prepq + size_t(i) * items * Q * kPrep,
                     rec + size_t(i) * items * Q * K,
                     outq + size_t(i) * items * Q * K,
                     H};
      launch_pdl(rows_q_kernel<Q>, dim3(unsigned(items)), kThreads, size_t(smem), st, aq);
    });
    CK(cudaFree(prepq));
    CK(cudaFree(rec));
    CK(cudaFree(outq));
  }
  // ---- the small-batch floor rungs: empty, move/S (S CTAs per item) --------------------------
  {
    void (*const fns[])(Args) = {empty_kernel, move_split_kernel<1>, move_split_kernel<2>, move_split_kernel<4>,
                                 move_split_kernel<8>};
    const char* fnames[] = {"empty", "move/1", "move/2", "move/4", "move/8"};
    const int splits[] = {1, 1, 2, 4, 8};
    for (int f = 0; f < 5; ++f) {
      const int S = splits[f];
      const int smem = f == 0 ? 0 : (K / S) * K * 4;
      if (smem > 48 * 1024) CK(cudaFuncSetAttribute(fns[f], cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      rung(fnames[f], f == 0 ? 0.0 : double(items) * 2.0 * kTile * 4,
           [&](int i) { launch_pdl(fns[f], dim3(unsigned(items * S)), kThreads, size_t(smem), st, args(i)); });
    }
    for (int f = 0; f < kSplitFns; ++f) rung(split_names[f], row_bytes, [&](int i) { launch_split(f, i, st); });
    for (int f = 2; f < 5; ++f) {  // movec/S
      const int S = splits[f];
      static const char* cnames[] = {"", "", "movec/2", "movec/4", "movec/8"};
      rung(cnames[f], double(items) * 2.0 * kTile * 4, [&](int i) {
        launch_pdl(fns[f], dim3(unsigned(items * S)), kThreads, size_t((K / S) * K * 4), st, args(i), S);
      });
    }
    // rows-/S: the same without the norm's exchange and without a cluster (timing only)
    void (*const nn_fns[])(Args) = {rows_split_kernel<2, 1>, rows_split_kernel<4, 1>, rows_split_kernel<8, 1>};
    const char* nn_names[] = {"rows-/2", "rows-/4", "rows-/8"};
    for (int f = 0; f < 3; ++f) {
      const int S = split_s[f + 1];
      CK(cudaFuncSetAttribute(nn_fns[f], cudaFuncAttributeMaxDynamicSharedMemorySize, split_smem(S)));
      rung(nn_names[f], row_bytes, [&](int i) {
        launch_pdl(nn_fns[f], dim3(unsigned(items * S)), kThreads, size_t(split_smem(S)), st, args(i));
      });
    }
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    rung("flat", double(items) * 2.0 * kTile * 4, [&](int i) {
      launch_pdl(flat_kernel, dim3(unsigned(sms * 8)), kThreads, 0, st,
                 FlatArgs{state, slots + size_t(i) * B, H, items});
    });
  }
  if (failed) std::fprintf(stderr, "rows_prepared: %d check(s) FAILED\n", failed);
  return failed ? 1 : 0;
}
