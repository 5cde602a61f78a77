// kda/cuda/step_kernel.cuh — the Split / Wide step kernel: every step kind of SPEC §4
// (decode, append, per_token, record, fused) for one (request, head) item per cluster of
// SPLIT CTAs. SPLIT = 1 is the Wide variant (one CTA per item); SPLIT ∈ {2, 4, 8} is the
// Split variant (the item's 128 V rows over a thread-block cluster, for small batches).
//
// Work of one item (SPEC §3), q tokens:
//   conv + SiLU of the 384 channels of head h · q/k l2 norm · gate z = F_B[h]·f_a (+dt_bias;
//   gate mode 1: z from the gate kernel, gate_kernel.cuh; mode 2: z given)
//   · beta · then per V row: fold of the pending records, per token decay, u = β(v − S·k),
//   S += u kᵀ, o = S·q · gated RMSNorm over the 128 rows.
//
// NOTES: structure. The delta rule is independent per V row: row v needs only itself and
// the item's k, q, e, β, v[v] (and the records' u[v], k, e). So the CTA streams its RC rows
// through shared memory in chunks of CR = min(32, RC) rows — one bulk copy (TMA) per chunk,
// completing on the chunk's mbarrier, up to `stages` chunks in flight — and each warp works
// on RPW = CR / 8 rows of a chunk at a time in registers. The state never sits whole in
// registers, so a CTA needs few of them and three or four CTAs share an SM: the latency of
// one item's dependent phases (request → state and window → conv, gate → rows → RMSNorm)
// is hidden by the other items on the SM rather than by a persistent pipeline.
//
// Thread layout in a chunk: warp w owns rows [w·RPW, w·RPW + RPW) of the chunk; lane l owns
// K columns [4l, 4l + 4) of each (one float4 per row). q = 1: per row the two dot products
// S·k and S·q of the decayed row are reduced together (rows_reduce of 2·RPW partials) and
// o = S'·q is formed as (S·e)·q + u·(k·q): one reduction per token instead of two, and no
// second pass over the updated row. q ≥ 2: tokens in groups of up to four share one
// reduction (NOTES: token groups, in the row loop).
//
// Cluster cooperation (SPLIT > 1), through distributed shared memory: each rank computes
// the conv of all 256 q/k channels itself (cheap next to its state rows; its four conv warps run
// side by side); the 128 gates too, except at q = 1 in gate mode 0, where each rank computes a
// slice from F_B and stores it into every rank (NOTES: the shared gate). The RMSNorm needs the
// ranks' partial Σo², which each rank stores into every rank by st.async (NOTES: the norm
// exchange). The q/k window columns and the record k/g rows (shared by the ranks) are written by
// rank 0 once every rank's partials have landed, when every rank has read the old window and its
// staged records. One cluster barrier: an arrive at entry and a wait before the first remote
// write (every CTA has started: before the shared gate's stores, else before the Σo² exchange);
// the shared gate and the partials complete on local mbarriers.
//
// Programmatic dependent launch: before cudaGridDependencySynchronize() only weights are
// touched (the mbarrier init, the thread's F_B slice or its L2 prefetch, A_log, dt_bias and
// norm_w) — except in gate mode 1, where the previous grid is this step's own gate kernel,
// which releases the step only after its own wait on the engine's previous grid: there the
// whole item up to the logits (request, state copies, window, inputs) runs before the wait
// (NOTES: the late wait).
#pragma once

#include <cuda_runtime.h>

#include <cuda/ptx>
#include <type_traits>

#include "kda/cuda/common.cuh"
#include "kda/cuda/config.h"
#include "kda/cuda/item.cuh"
#include "kda/request.h"

#ifndef KDA_STEP_WAVE_TOKENS
#define KDA_STEP_WAVE_TOKENS 4
#endif
#ifndef KDA_STEP_SMALL_GRID_WAVE_TOKENS
#define KDA_STEP_SMALL_GRID_WAVE_TOKENS 16
#endif
// KDA_TIMELINE (benchmark builds only, benchmarks/ladder/timeline.py): each Wide CTA overwrites the
// first 48 bytes of its item's output row with its timeline: %globaltimer at entry, after the PDL
// wait, at the row loop, at its first chunk, at exit, and its SM. The outputs are then not outputs.
#ifdef KDA_TIMELINE
#define KDA_TL(var) (var) = ::kda::cuda::timeline_now()
#else
#define KDA_TL(var) ((void)0)
#endif

namespace kda::cuda {

#ifdef KDA_TIMELINE
__device__ __forceinline__ unsigned long long timeline_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

/// Compile-time shape of the kernel: SPLIT CTAs per item, state dtype, Q tokens per request
/// (1: decode / append, whose shared-memory offsets are then constants and whose token
/// vectors stay in registers; 0: q at run time, the verify kinds; 2, 3, 4, 8, 16: the verify
/// kinds at that q with offsets, token loops and token groups fixed at compile time, instantiated
/// for Wide without the F_B path: record and fused up to 12% faster than Q = 0 (fused q = 4 at
/// six requests +0.9%), per_token −5…+0.3%, q = 3 record 7–12% and fused up to 7% faster,
/// docs/data/ladder_s21/run4, docs/data/ladder_s22/run1, docs/data/ladder_s25/run2),
/// and GATE_FB: whether the kernel may compute the gate from F_B (gate mode 0). The register
/// budget is cut for four CTAs per SM.
/// NOTES: with q at run time, the F_B path's registers (a 64-element F_B slice per thread
/// held across the token loop) made the kernel spill 128 bytes; gate modes 1 and 2 run an
/// instantiation without it: no spills, and record / fused / per_token steps 2–15% faster
/// (docs/data/ladder_s13/run5: 12–15% at q = 2, 7–9% at q = 4, 2–4% at q = 16). q = 1 does not
/// spill with it, yet Wide's fp32 q = 1 kernel without it ran gate mode 2 decode 1.7–1.9% faster at
/// 768 items, 0.1–1.5% at 384–24,576, gate mode 1 decode and append Qr = 16 up to 0.9% faster
/// (docs/data/ladder_s43/run4, rung n4): gate modes 1 and 2 run that one.
template <int SPLIT_, class StateT_, int Q_, bool GATE_FB_ = true, int MIN_BLOCKS_ = 4,
          unsigned KINDS_ = cuda_config::kAllStepKinds>
struct StepTraits {
  static constexpr int kSplit = SPLIT_;
  using StateT = StateT_;
  static constexpr int kQ = Q_;
  static constexpr bool kGateFb = GATE_FB_;
  /// The small-grid verify form (cuda_config::small_grid_verify): Split at q ≥ 2 (run-time q),
  /// which runs only small grids (the planner's pick up to 12 items, at most 96 CTAs), and the
  /// Wide verify kernels instantiated with MIN_BLOCKS = 2 (the planner's layout for grids of at
  /// most two CTAs per SM) are compiled for two CTAs per SM, 128 registers instead of 64 (at 64
  /// the Split ones spill 152–168 bytes), and take the sigmoid's reciprocal by `rcp.approx`
  /// (NOTES: the device's special functions, numerics.h). Split record / fused q = 4 at H = 12,
  /// B = 1: 9.11 / 9.95 µs against 9.81 / 10.54 (−7.1% / −5.6%); at two CTAs per SM alone 9.76 /
  /// 10.52; Wide q = 4 without F_B at H = 96, B = 1: 10.56 / 14.02 against 11.29 / 14.71
  /// (docs/data/ladder_s30/run1, run2). Split at q = 1 keeps four: at two it ran 4.70 µs against
  /// 4.50 at H = 12, B = 1 and 5.28 against 5.11 at H = 24 (with `rcp.approx` 4.57 / 5.17); so
  /// does Wide at q = 1 (decode 2.5–4.6% slower at two; ladder_s30/run1, mb2, mb2r, w2).
  static constexpr int kMinBlocks = cuda_config::step_kernel_ctas_per_sm(SPLIT_, Q_, MIN_BLOCKS_);
  static constexpr bool kSmallGridVerify = Q_ != 1 && kMinBlocks == cuda_config::kSmallGridVerifyCtasPerSm;
  /// q = 1 above four CTAs per SM: the token vectors are read from shared memory per chunk
  /// (k, q scaled on the fly, e precomputed at the gate) instead of held in 12 registers.
  static constexpr bool kLeanVectors = Q_ == 1 && MIN_BLOCKS_ > 4;
  /// The lean vectors scaled once and laid out by reduction half where the kernel runs a recording
  /// kind (append, record, fused): NOTES: the lean vectors, in the kernel.
  static constexpr bool kLeanOwnHalf = kLeanVectors && (KINDS_ & cuda_config::kRecordingStepKinds) != 0;
  /// The six-CTA bf16 kernel (q = 1, lean vectors) reads its state with an L2 evict-first policy: 2.6-3.1% faster at
  /// H = 96, B = 128 and 256 (mode 1); the same hint makes fp32 decode 1-6% slower from 3072
  /// items (docs/data/ladder_s15/run4, run5, rung ef).
  static constexpr bool kStateEvictFirst = kLeanVectors;
  /// q ≥ 2 without the F_B path (gate modes 1 and 2) loads every input of its q
  /// tokens in the first wave — the window, the raw logits into s_g, the q/k/v inputs of
  /// tokens 1…q−1 into s_yq / s_yk / s_yv (each thread its own channels, so no barrier) —
  /// instead of after the staged-inputs barrier and token by token in the conv: one dependent
  /// round trip instead of about 2 + q. Record / fused / per_token at H = 96, q = 2…16, gate
  /// mode 1: 0.5–9% faster at 66 of 69 points, at most 2.6% slower at the others
  /// (docs/data/ladder_s16/run1).
  static constexpr bool kEarlyTokenInputs = Q_ != 1 && !GATE_FB_;
  /// Wide at q = 1 and with early token inputs (q >= 2), in the kernels of the recording kinds, waits on the
  /// staged-inputs barrier only where the step computes the F_B dot (gate mode 0): NOTES: the staged inputs'
  /// barrier, in the kernel.
  static constexpr bool kStagedBarrierForFbOnly =
      SPLIT_ == 1 && (Q_ == 1 || kEarlyTokenInputs) && (KINDS_ & cuda_config::kRecordingStepKinds) != 0;
  /// Wide with early token inputs also loads the conv taps and bias of a thread's channels in
  /// the first wave, not at the conv after the staged-inputs barrier (one L2 round trip off the
  /// item's chain): record / fused / per_token at H = 96, q = 2, 3, 4, 8, one to 256 requests
  /// faster at 43 of 48 points (by up to 3.7%), at most 1.3% slower at the others. Split keeps them at the
  /// conv: its q ≥ 2 kernels at H = 12, one request, were 0.4–3.1% slower with them early
  /// (Split 4 and 8 at run-time q spill 24 and 44 bytes then; docs/data/ladder_s26/run1, rung cwf).
  /// So do the bf16 q = 8 and 16 kernels, which were not measured with them and spill 24 and 16
  /// bytes then (bf16 q = 3, 4 and run-time q take them: no new spills).
  /// The small-grid form (128 registers) takes them at every q.
  /// The storing kinds' q = 1 Wide kernels without the F_B path (decode in gate modes 1 and 2, fp32 and the six-CTA
  /// bf16 form) load the conv taps and bias before the PDL wait (they are weights, SPEC §7), not at the conv after
  /// the staged-inputs barrier: the conv's FFMAs held 7.8% of the stall samples waiting on them (gate mode 2, H = 96,
  /// B = 32). H200, fp32 gate mode 2: 1.2–4.1% faster at 768–3072 items, 0.6% at 6144; bf16 `auto` at 6144 items 1.1%
  /// (ladder_s53/run1, rung cw2); H100: 2.0–2.2% slower at 384 items, 0.3–2% faster from 768 (run2). No new spills.
  static constexpr bool kConvWeightsBeforeWait =
      Q_ == 1 && SPLIT_ == 1 && !GATE_FB_ && KINDS_ == cuda_config::kStoringStepKinds;
  static constexpr bool kEarlyConvWeights =
      kEarlyTokenInputs && SPLIT_ == 1 && (sizeof(StateT_) == 4 || Q_ <= 4 || kSmallGridVerify);
  /// NOTES: the first stages after the window, in the kernel. Where measured to win: the storing kinds' q = 1 Wide
  /// kernels of fp32 gate mode 0 (384 items 3.9% faster) and of bf16 (six CTAs, 6144 items: 3.7% faster together with
  /// kConvWeightsBeforeWait, 1.1% with that alone). The fp32 kernel without F_B runs 0.1–1.2% slower with it than
  /// with its conv taps early alone; append (fp32, 6144 items) ties (docs/data/ladder_s53/run1, rungs wf, wfc).
  static constexpr bool kFirstStagesAfterWindow =
      Q_ == 1 && SPLIT_ == 1 && KINDS_ == cuda_config::kStoringStepKinds && (GATE_FB_ || sizeof(StateT_) == 2);
  /// A_log, dt_bias and norm_w are loaded before the PDL wait (NOTES: the weights before the
  /// wait, in the kernel): decode up to 4.9% faster below 6144 items, Split at one request
  /// 1.5–3.7%, verify up to 6.8% (docs/data/ladder_s27/run1, run2). Not in the six-CTA bf16
  /// kernel, which spills 36 bytes with them (12 without) and was 2–4% slower from 768 items, nor
  /// in the fp32 q = 8 and 16 kernels (q = 8 spills 16 bytes with them, 4 without: record / fused
  /// / per_token up to 4.2% slower; q = 16 ±1%); bf16 q = 8 takes them (0.7–2.4% faster) and bf16
  /// q = 16, not measured, does not.
  /// The small-grid form (128 registers) takes them at every q.
  static constexpr bool kEarlyWeights =
      !kLeanVectors && (Q_ < 8 || (Q_ == 8 && sizeof(StateT_) == 2) || kSmallGridVerify);
  /// Tokens per batch of the q ≥ 2 first wave (NOTES: the q ≥ 2 first wave): all q where q is
  /// known at compile time; with q at run time KDA_STEP_WAVE_TOKENS (the ladder's knob), the
  /// loads beyond q predicated off: 4 keeps the kernel free of spills (8 and 16 spill 26 bytes).
  /// Wide's small-grid form takes KDA_STEP_SMALL_GRID_WAVE_TOKENS = 16 (128 registers, no
  /// spills): record / fused at H = 96, one and two requests, q = 5, 6, 7, 12 1.6–6.4% faster than
  /// with 4 (8: 0–1.5%; docs/data/ladder_s31/run2, wt16, wt8). Split's is not measured: 4.
  static constexpr int kWaveTokens = Q_ > 1                              ? Q_
                                     : (SPLIT_ == 1 && kSmallGridVerify) ? KDA_STEP_SMALL_GRID_WAVE_TOKENS
                                                                         : KDA_STEP_WAVE_TOKENS;
  /// Split at q = 1 in gate mode 0: the ranks share the item's 128 gates (NOTES: the shared
  /// gate, in the kernel) instead of each computing all of them from F_B.
  static constexpr bool kSharedGate = SPLIT_ > 1 && Q_ == 1 && MIN_BLOCKS_ <= 4;
  /// The sigmoid's reciprocal by `rcp.approx` (kSmallGridVerify, above).
  static constexpr bool kApproxRcp = kSmallGridVerify;
  /// The q = 1 row loop compiled a second time without the token's update, for the step kinds that
  /// do not store the rows after the token (NOTES: the dead update, in the kernel), where an fp32
  /// Wide instantiation is compiled for every kind (kKinds; the dispatch runs append, record and
  /// fused on those, decode and per_token on their own). Split and bf16 keep one loop there: the
  /// second copy cost them 8 and 16 bytes more of stack.
  static constexpr bool kSkipDeadUpdate = Q_ == 1 && SPLIT_ == 1 && sizeof(StateT_) == 4;
  /// The step kinds the instantiation runs (cuda_config::step_kind bits; NOTES: the kinds at
  /// compile time, in the kernel): the others' code is compiled out.
  static constexpr unsigned kKinds = KINDS_;
  static_assert(KINDS_ != 0 && (KINDS_ & ~cuda_config::kAllStepKinds) == 0, "step kinds");
  /// Chunks a warp takes per pass where every chunk is in flight (NOTES: chunks per pass, in the
  /// kernel; cuda_config::chunks_per_pass).
  static constexpr int kChunksPerPass = cuda_config::chunks_per_pass(SPLIT_, Q_, MIN_BLOCKS_, int(sizeof(StateT_)));
  static_assert(kChunksPerPass >= 1 &&
                    cuda_config::chunks_per_cta(SPLIT_, Q_, int(sizeof(StateT_))) % kChunksPerPass == 0,
                "chunks per pass");
  /// The narrow form (cuda_config::narrow_form; NOTES: the narrow form, in the kernel): the instantiation for
  /// kNarrowCtasPerSm CTAs per SM of the storing kinds' lean bf16 kernel runs CTAs of kNarrowThreads.
  static constexpr bool kNarrow =
      cuda_config::narrow_form(SPLIT_, Q_, int(sizeof(StateT_)), KINDS_ == cuda_config::kStoringStepKinds) &&
      !GATE_FB_ && MIN_BLOCKS_ == cuda_config::kNarrowCtasPerSm;
  static constexpr int kThreads = kNarrow ? cuda_config::kNarrowThreads : cuda_config::kStepThreads;
  /// The six-CTA bf16 kernel of the storing kinds tests a thread's conv roles one after the other (`if (tid < K)`,
  /// then `if (tid >= K && …)`) instead of as if / else if: the same work, compiled otherwise; H100, bf16 decode at
  /// 768 items in gate mode 2 4.8–5.6% faster (21.60–21.81 against 22.68–23.11 µs in three runs), 1536 items up to
  /// 1%, elsewhere within ±0.5% (docs/data/ladder_s56/run4–run6, rung ifif); the append kernel lost 0.7% with it.
  static constexpr bool kConvTwoTests =
      kLeanVectors && !kNarrow && sizeof(StateT_) == 2 && KINDS_ == cuda_config::kStoringStepKinds;
  static constexpr int kWarps = kThreads / 32;
  /// The fold warps the launch adds (NOTES: fold warps, in the kernel; cuda_config::fold_warps):
  /// the twins of the small-grid verify form, bounded as one CTA of kThreads + 32 · kFoldWarps
  /// threads (they run only with the SM to themselves).
  static constexpr int kFoldWarps = cuda_config::fold_warps(SPLIT_, Q_, MIN_BLOCKS_);
  static constexpr int kBoundThreads = kThreads + 32 * kFoldWarps;
  static constexpr int kBoundBlocks = kFoldWarps > 0 ? 1 : kMinBlocks;
  static constexpr int kRows = cuda_config::rows_per_cta(kSplit);                                          // RC
  static constexpr int kChunkRows = cuda_config::chunk_rows(kSplit, Q_, int(sizeof(StateT_)), kThreads);   // CR
  static constexpr int kChunks = cuda_config::chunks_per_cta(kSplit, Q_, int(sizeof(StateT_)), kThreads);  // RC / CR
  static constexpr int kRowsPerWarp = kChunkRows / kWarps;                                                 // RPW
  static_assert(kRowsPerWarp >= 2 && kRowsPerWarp * kWarps == kChunkRows, "rows per warp");
  static_assert(kThreads % kHeadDim == 0 && (kNarrow || kThreads >= 2 * kHeadDim), "a thread per (channel, k | q)");
  static_assert(kNarrow || kRows <= kThreads - kHeadDim, "one thread per own v channel");
};

/// v into element i of `local` in every rank's shared memory by st.async, each store completing
/// its 4 bytes on `bar` of the receiving rank (store_rank_async).
template <int SPLIT>
__device__ __forceinline__ void store_all_ranks_async(float* local, int i, float v, uint64_t* bar) {
#pragma unroll
  for (int r = 0; r < SPLIT; ++r) store_rank_async(local, i, v, bar, uint32_t(r));
}

/// Whether a step of `mode` is of a kind in SET (cuda_config::step_kind bits) on an instantiation
/// for the kinds KINDS (NOTES: the kinds at compile time, in the kernel): a constant where KINDS
/// lies all inside or all outside SET, else the mode compared with SET's kinds in their order.
template <unsigned KINDS, unsigned SET>
__device__ __forceinline__ bool kind_in(StepMode mode) {
  if constexpr ((KINDS & SET) == 0) {
    return false;
  } else if constexpr ((KINDS & ~SET) == 0) {
    return true;
  } else {
    bool in = false;
#pragma unroll
    for (int m = 0; m < 8; ++m)
      if ((SET >> m) & 1u) in = in || mode == StepMode(m);
    return in;
  }
}
template <unsigned KINDS, StepMode M>
__device__ __forceinline__ bool kind_is(StepMode mode) {
  return kind_in<KINDS, cuda_config::step_kind(M)>(mode);
}

/// 1/|y_q|, 1/|y_k| and y_q·y_k of token t from the four warps' partial sums (fixed order,
/// so every thread computes the same bits).
struct TokenNorms {
  float iq, ik, qk;
};
__device__ __forceinline__ TokenNorms token_norms(const float* s_part, int t) {
  const float* pt = s_part + t * 12;
  const float sq = ((pt[0] + pt[3]) + pt[6]) + pt[9];
  const float sk = ((pt[1] + pt[4]) + pt[7]) + pt[10];
  const float sqk = ((pt[2] + pt[5]) + pt[8]) + pt[11];
  return {inv_sqrt_(sq + kL2Eps), inv_sqrt_(sk + kL2Eps), sqk};
}

template <class T>
__global__ void __launch_bounds__(T::kBoundThreads, T::kBoundBlocks)
    kda_step_kernel(const __grid_constant__ StepParams p) {
  namespace ptx = ::cuda::ptx;
  using StateT = typename T::StateT;
  using IO = StateIO<StateT>;
  constexpr int SPLIT = T::kSplit, RC = T::kRows, CR = T::kChunkRows, NCH = T::kChunks;
  constexpr int RPW = T::kRowsPerWarp, NT = T::kThreads, K = kHeadDim;
  constexpr int G2 = 16 / RPW;  // lanes per reduced partial (delta_rows)

  // ---- shared memory ------------------------------------------------------------------
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t full[cuda_config::kStepMaxStages];    // chunk stages
  __shared__ uint64_t rec_full;                             // staged records
  __shared__ uint64_t gate_full;                            // the shared gate's 128 values (T::kSharedGate)
  __shared__ uint64_t norm_full;                            // Split: the ranks' Σo² partials
  __shared__ uint64_t folded[cuda_config::kStepMaxStages];  // fold warps: the chunk's records folded in

  // the lean vectors' scaled k and q (T::kLeanOwnHalf: Wide, where the shared gate never runs)
  uint64_t* const vec_full = &gate_full;

  const int q = T::kQ ? T::kQ : p.q, H = p.H, D = H * K;
  const StepMode mode = StepMode(p.mode);
  // NOTES: the kinds at compile time. An instantiation runs the step kinds T::kKinds only (the
  // dispatch chooses by kind; launch_step refuses others), so whether the step is of a set of kinds
  // is known at compile time where the instantiation's kinds are all inside or all outside it, and
  // the code of the kinds it never runs is compiled out: decode's kernels carry no records, no fold
  // and no second copy of the q = 1 row loop (the dead update, below).
  constexpr unsigned KINDS = T::kKinds;
  const bool records = kind_in<KINDS, cuda_config::kRecordingStepKinds>(mode);
  const bool folds = kind_is<KINDS, StepMode::kFused>(mode) || kind_is<KINDS, StepMode::kAppend>(mode);
  // gate mode 0: z from F_B[h] here; 1: z from the gate kernel's fp32 workspace; 2: z in gate_in
  const bool gate_from_fb = T::kGateFb && p.gate_mode == int(GateMode::kPerItem);
  const bool gate_from_ws = p.gate_mode == int(GateMode::kShared);
  const int stages = p.ring_stages;
  const int WC = 2 + q;  // window columns written (W = 4 on CUDA)
  const cuda_config::StepSmem L{q, SPLIT, stages, int(sizeof(StateT)), folds ? p.Qr : 0, WC, NT};
  float* s_fa = reinterpret_cast<float*>(smem + L.fa());
  float* s_yq = reinterpret_cast<float*>(smem + L.yq());
  float* s_yk = reinterpret_cast<float*>(smem + L.yk());
  float* s_g = reinterpret_cast<float*>(smem + L.g());
  float* s_e = reinterpret_cast<float*>(smem + L.e());
  float* s_yv = reinterpret_cast<float*>(smem + L.yv());
  float* s_o = reinterpret_cast<float*>(smem + L.o());
  float* s_og = reinterpret_cast<float*>(smem + L.og());
  float* s_win = reinterpret_cast<float*>(smem + L.win());
  float* s_part = reinterpret_cast<float*>(smem + L.part());
  float* s_beta = reinterpret_cast<float*>(smem + L.beta());
  float* s_red = reinterpret_cast<float*>(smem + L.red());
  int32_t* s_tslots = reinterpret_cast<int32_t*>(smem + L.tslots());
  unsigned char* s_state = smem + L.state();
  float* s_recu = reinterpret_cast<float*>(smem + L.rec_u());
  float* s_reckg = reinterpret_cast<float*>(smem + L.rec_kg());
  float* s_kgq = reinterpret_cast<float*>(smem + L.kgq());  // q >= 2
  float* s_mn = reinterpret_cast<float*>(smem + L.mn());
  float* s_nrm = reinterpret_cast<float*>(smem + L.nrm());  // q >= 2: 1/|y_k| [16], 1/|y_q|·scale [16]
  const int qg = L.qg();                                    // q in whole token groups

  // one state chunk into its stage (thread 0)
  auto state_g2s = [&](unsigned char* dst, const char* src, uint64_t* bar) {
    if constexpr (T::kStateEvictFirst)
      bulk_g2s_hint(dst, src, uint32_t(L.stage_bytes()), bar, l2_policy(::cuda::access_property::streaming{}));
    else
      bulk_g2s(dst, src, uint32_t(L.stage_bytes()), bar);
  };

  // ---- the item -----------------------------------------------------------------------
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
#ifdef KDA_TIMELINE
  unsigned long long tl[5] = {0, 0, 0, 0, 0};
#endif
  KDA_TL(tl[0]);
  // Named barriers (0 is __syncthreads): the NT main threads once fold warps may have left, and the
  // fold warps among themselves.
  enum : unsigned { kBarMain = 1, kBarFold = 2 };
  auto sync_main = [] {
    if constexpr (T::kFoldWarps > 0)
      named_barrier_sync<kBarMain, NT>();
    else
      __syncthreads();
  };
  const int rank = SPLIT == 1 ? 0 : int(blockIdx.x % SPLIT);
  // (32-bit: a grid has fewer than 2^31 CTAs; the 64-bit division cost 28 instructions a warp)
  const unsigned item = blockIdx.x / unsigned(SPLIT);
  const int b = int(item / unsigned(H)), h = int(item - unsigned(b) * unsigned(H));
  const int64_t row_base = int64_t(b) * q;  // first input/output row of the request
  // gate row and half (two threads per row). The shared gate: the rank's slice of K / SPLIT rows
  // on the CTA's last 2·K / SPLIT threads (NOTES: the shared gate)
  constexpr int kGateThreads = 2 * K / SPLIT;
  const int gt = tid - (NT - kGateThreads);  // >= 0: a thread of the rank's gate slice
  const int gi = T::kSharedGate ? rank * (K / SPLIT) + (gt < 0 ? 0 : gt >> 1) : tid >> 1, gpart = tid & 1;
  const uint16_t* fb_src = gate_from_fb ? p.f_b + int64_t(h * K + gi) * p.f_b_row + gpart * (kRank / 2) : nullptr;
  // NOTES: the shared gate (T::kSharedGate, gate mode 0). Each rank of a Split item computed all
  // 128 gates itself, each from F_B[h] (32 KiB per rank). Here rank r computes the gate rows
  // [r·128/SPLIT, (r + 1)·128/SPLIT) (whole warps: two threads per row) and stores each gate into
  // every rank by st.async, completing on that rank's gate_full; a rank waits for its 128 gates
  // beside the barrier after the conv. A row's gate takes the same operations on any rank, so
  // the bits are the non-shared form's. (Sharing the q / k conv too, with its norm partials, lost
  // in gate mode 2, where the ranks' conv warps run side by side anyway: docs/PERFORMANCE.md.)
  const bool share_gate = T::kSharedGate && gate_from_fb;
  const bool gate_here = !share_gate || gt >= 0;

  // ---- before the PDL wait: barriers and weights only -----------------------------------
  // the conv taps and bias before the wait where T::kConvWeightsBeforeWait (q / k: cwe[0..3], cwe[4..7], cbe[0..1];
  // v: cwe[0..3], cbe[0]); not load_conv_weights' cw, cb below: shared, they moved verify kernels' register choices
  constexpr bool NARROW = T::kNarrow;
  float cwe[NARROW ? 12 : 8], cbe[NARROW ? 3 : 2];
  if constexpr (T::kConvWeightsBeforeWait && NARROW) {
    // (the narrow form: the thread's q, k and v channel: cwe[0..3], cwe[4..7], cwe[8..11], cbe[0..2])
    const int cq0 = h * K + tid;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      cwe[j] = p.conv_w[(0 * 4 + j) * D + cq0], cwe[4 + j] = p.conv_w[(1 * 4 + j) * D + cq0],
      cwe[8 + j] = p.conv_w[(2 * 4 + j) * D + cq0];
    cbe[0] = p.conv_b ? p.conv_b[cq0] : 0.f, cbe[1] = p.conv_b ? p.conv_b[D + cq0] : 0.f;
    cbe[2] = p.conv_b ? p.conv_b[2 * D + cq0] : 0.f;
  } else if constexpr (T::kConvWeightsBeforeWait) {
    const int cq0 = h * K + tid, cv0 = 2 * D + h * K + rank * RC + (tid - K);
    if (tid < K) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        cwe[j] = p.conv_w[(0 * 4 + j) * D + cq0], cwe[4 + j] = p.conv_w[(1 * 4 + j) * D + cq0];
      cbe[0] = p.conv_b ? p.conv_b[cq0] : 0.f, cbe[1] = p.conv_b ? p.conv_b[D + cq0] : 0.f;
    } else if (tid < K + RC) {
#pragma unroll
      for (int j = 0; j < 4; ++j) cwe[j] = p.conv_w[(2 * 4 + j) * D + (cv0 - 2 * D)];
      cbe[0] = p.conv_b ? p.conv_b[cv0] : 0.f;
    }
  }
  // NOTES: the weights before the wait. The weights a thread reads after the staged-inputs
  // barrier — A_log[h], the dt_bias of its gate row, the norm weight of its epilogue column — are
  // loaded here where T::kEarlyWeights: at the gate and in the epilogue each was one more L2
  // round trip on the item's chain (the expf of A_log held 1.8% of append's stall samples).
  // (The conv taps come here too in the q = 1 kernels without F_B, T::kConvWeightsBeforeWait; with
  // F_B every q = 1 kernel spilled with them: the F_B slice is live then.)
  // The gate row: `grow` below (one thread per row at q = 1 without F_B, the staged logits'
  // row with early token inputs, NT being a multiple of K); the epilogue column: NT is a
  // multiple of RC. (`own_row` restates grow's rule here rather than moving grow up: moved, it
  // changes the six-CTA bf16 kernel's SASS, which keeps the late loads because they lost there.)
  float a_log = 0.f, dtb_w = 0.f, nw = 0.f;
  if constexpr (T::kEarlyWeights) {
    const bool own_row = T::kEarlyTokenInputs || (T::kQ == 1 && !gate_from_fb);
    a_log = p.A_log[h];
    dtb_w = p.dt_bias[h * K + (own_row ? tid & (K - 1) : gi)];
    nw = p.output_norm ? p.norm_w[rank * RC + tid % RC] : 0.f;
  }
  if (tid == 0) {
    for (int s = 0; s < stages; ++s) ptx::mbarrier_init(&full[s], 1);
    ptx::mbarrier_init(&rec_full, 1);
    if constexpr (T::kSharedGate) ptx::mbarrier_init(&gate_full, 1);
    if constexpr (T::kLeanOwnHalf) ptx::mbarrier_init(vec_full, 32);
    if constexpr (SPLIT > 1) ptx::mbarrier_init(&norm_full, 1);
    if constexpr (T::kFoldWarps > 0)
      for (int s = 0; s < stages; ++s) ptx::mbarrier_init(&folded[s], 32 * T::kFoldWarps);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  // NOTES: the thread's F_B slice (a weight) goes into registers before the wait (q = 1): its
  // L2 or DRAM latency then hides behind the previous step's tail and the request round trip.
  // With q ≥ 2 the registers are needed elsewhere (they spilled): the slice is
  // prefetched into L2 and loaded at the gate.
  uint4 fb[8];
  if (gate_from_fb && gate_here) {
    if constexpr (T::kQ == 1) {
      const uint4* src = reinterpret_cast<const uint4*>(fb_src);
#pragma unroll
      for (int j = 0; j < 8; ++j) fb[j] = src[j];
    } else {
      asm volatile("prefetch.global.L2 [%0];" ::"l"(fb_src));
    }
  }
  __syncthreads();  // barrier init visible before any wait on it
  cudaTriggerProgrammaticLaunchCompletion();
  // NOTES: the late wait. In gate mode 1 this grid is launched by the gate kernel's trigger,
  // which comes after that kernel's own wait: the engine's previous grid has completed and its
  // writes are visible, so only the logits (this launch's gate kernel's output) need the wait,
  // placed right before they are loaded. The item's request, state copies and first wave then
  // overlap the gate GEMM instead of following it. (Forms without a late logit load wait here.)
  const bool late_wait = gate_from_ws && (T::kQ == 1 || T::kEarlyTokenInputs);
  if (!late_wait) cudaGridDependencySynchronize();
  KDA_TL(tl[1]);
  if constexpr (SPLIT > 1) ptx::barrier_cluster_arrive(ptx::sem_relaxed);

  // ---- the request: every thread resolves it (the same loads, broadcast), so the window
  //      loads need no barrier; thread 0 issues the bulk copies at once ---------------------
  const RequestPlan r = resolve_request(p, b);
  const bool run = r.kind == RequestKind::kRun;
  const int npend = folds && run ? r.pending : 0;
  if (share_gate && tid == 0 && run)
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &gate_full, uint32_t(K) * 4);
  if (SPLIT > 1 && tid == 0 && run)  // q partials from each of the SPLIT ranks
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &norm_full,
                                   uint32_t(q * SPLIT) * 4);
  // the first stages' state copies (thread 0): here, or where T::kFirstStagesAfterWindow once thread 0's
  // first-wave loads have returned (the q = 1 first wave below)
  auto issue_first_stages = [&] {
    const char* src = reinterpret_cast<const char*>(state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h)) +
                      int64_t(rank) * NCH * L.stage_bytes();
    const int first = stages < NCH ? stages : NCH;
    for (int c = 0; c < first; ++c) {
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[c],
                                     uint32_t(L.stage_bytes()));
      state_g2s(s_state + c * L.stage_bytes(), src + c * L.stage_bytes(), &full[c]);
    }
  };
  if (tid == 0 && run) {
    if constexpr (!T::kFirstStagesAfterWindow) issue_first_stages();
    if (npend > 0) {
      const float* corr = p.correction + int64_t(r.row) * p.correction_row + int64_t(h) * p.Qr * K;
      const float* kgp = p.key_gate + int64_t(r.row) * p.key_gate_row + int64_t(h) * p.Qr * 2 * K;
      ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &rec_full,
                                     uint32_t(npend) * (RC + 2 * K) * 4);
      if constexpr (SPLIT == 1) {
        bulk_g2s(s_recu, corr, uint32_t(npend) * K * 4, &rec_full);
      } else {
        for (int pp = 0; pp < npend; ++pp)
          bulk_g2s(s_recu + pp * RC, corr + pp * K + rank * RC, uint32_t(RC) * 4, &rec_full);
      }
      bulk_g2s(s_reckg, kgp, uint32_t(npend) * 2 * K * 4, &rec_full);
    }
  }
  // The staged records' gates g replaced by their decays e = exp(g), in place, by threads first,
  // first + stride, … (the main warps, or the fold warps where they fold). q = 1 kernels: four
  // columns a thread (unit i = record i / 32, columns 4·(i % 32) …). NOTES: a unit of four spares
  // the element's record and column (SASS: 7.5 instructions a decay against 15.5). With the fold
  // below it took fp32 append at Qr = 8 3.3–3.7% faster on 88 SMs (the six-CTA kernel's spill
  // stores 20 → 8 bytes) and bf16 append 1.4–1.9%; the q ≥ 2 kernels keep one a thread (bf16
  // fused q = 3 lost 0.5–1% with four: a new 4-byte spill). docs/PERFORMANCE.md, session 71.
  static_assert(K == 4 * 32, "a record's gates: 32 float4");
  auto records_decays = [&](int first, int stride) {
    if constexpr (T::kQ == 1) {
#pragma unroll 1
      for (int i = first; i < npend * 32; i += stride) {  // (one unit at a time: fewer live registers)
        float4* gp = reinterpret_cast<float4*>(s_reckg + (i >> 5) * 2 * K + K) + (i & 31);
        const float4 g4 = *gp;
        *gp = make_float4(decay_of(g4.x), decay_of(g4.y), decay_of(g4.z), decay_of(g4.w));
      }
    } else {
      for (int i = first; i < npend * K; i += stride) {
        float* gp = s_reckg + (i / K) * 2 * K + K + i % K;
        *gp = decay_of(*gp);
      }
    }
  };
  // ---- fold warps (fused; NOTES: fold warps): fold each chunk as it lands, then leave ---------
  // (the dispatch runs a twin only for fused steps with every chunk in flight: stages == NCH)
  const bool fold_on = T::kFoldWarps > 0 && npend > 0;
  if constexpr (T::kFoldWarps > 0) {
    if (tid >= NT) {
      // NOTES: fold warps. A fused step's fold of the pending records needs only the state and
      // the records, not the step's tokens, so where the CTA has the SM to itself these warps
      // fold each chunk in place in its stage and write it to the checkpoint while the other
      // warps run the q tokens' prologue (request, first wave, conv, gate, norms); those then
      // wait on `folded` instead of `full`. Each element takes the fold's operations in the same
      // order (fold_record_e), so the bits are the inline fold's.
      if (!fold_on) return;
      constexpr int FW = T::kFoldWarps, FT = 32 * FW, FR = CR / FW;
      static_assert(CR % FW == 0, "a fold warp's rows of a chunk");
      const int ft = tid - NT, fw = ft >> 5;
      mbar_wait(&rec_full, 0);
      records_decays(ft, FT);
      named_barrier_sync<kBarFold, FT>();  // every record's e
      StateT* ck = state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h);
      for (int c = 0; c < NCH; ++c) {
        mbar_wait(&full[c], 0);
        const int row0 = c * CR + fw * FR;
        StateT* st = reinterpret_cast<StateT*>(s_state + c * L.stage_bytes()) + (fw * FR) * K + lane * 4;
        float4 S[FR];
#pragma unroll
        for (int i = 0; i < FR; ++i) S[i] = load_smem_row4(st + i * K);
        for (int pp = 0; pp < npend; ++pp) {
          const float4 kk = *reinterpret_cast<const float4*>(s_reckg + pp * 2 * K + lane * 4);
          const float4 ee = *reinterpret_cast<const float4*>(s_reckg + pp * 2 * K + K + lane * 4);
          fold_record_e<FR>(S, s_recu + pp * RC + row0, kk, ee);
        }
#pragma unroll
        for (int i = 0; i < FR; ++i) {
          IO::store(ck + int64_t(row0 + i) * K + lane * 4, S[i]);
          store_smem_row4(st + i * K, IO::stored(S[i]));  // continue from what was stored (SPEC §9)
        }
        ptx::mbarrier_arrive(&folded[c]);  // (release: the stage's new rows)
      }
      return;
    }
  }

  if (!run) {
    // Pad or caller error: zero output rows, nothing else is read or written.
    for (int i = tid; i < q * RC; i += NT) p.out[(row_base + i / RC) * p.out_row + h * K + rank * RC + i % RC] = 0;
    if (r.kind == RequestKind::kError && h == 0 && rank == 0 && tid == 0)
      raise_error(p.error_flags, p.error_index, r.flags, b);
    // (the late wait here too: every CTA waits for the gate grid, so this grid never completes
    // before it, even when every request is a pad)
    if (late_wait) cudaGridDependencySynchronize();
    if constexpr (SPLIT == 1) {
      if (gate_from_ws) drop_gate_logits(p, row_base, h, q, tid);  // (after the wait: the gate grid's stores landed)
    }
    if constexpr (SPLIT > 1) ptx::barrier_cluster_wait();  // every rank takes this branch
    return;
  }
  const int off = r.accepted - 1;

  // the old window columns off..off+2 and x_0 of the thread's channels (threads 0–127: the q
  // and k channel of their index; 128…: the own v channels), before the barrier
  const int cq = h * K + tid, ck = D + cq;  // tid < 128
  // (the own v channel: threads 128 … 128 + RC − 1; the narrow form: every thread, of its index)
  const int vj = NARROW ? tid : tid - K, cv = 2 * D + h * K + rank * RC + vj;
  float w0[3], w1[3], x0 = 0.f, x1 = 0.f;
  [[maybe_unused]] float wv[3], xv0 = 0.f;  // the narrow form's v channel
  // the conv taps and bias of the thread's channels (q / k: cw[0..3], cw[4..7], cb[0..1]; v: cw[0..3],
  // cb[0]): loaded in the first wave where T::kEarlyConvWeights, else at the conv
  float cw[8], cb[2];
  auto load_conv_weights = [&] {
    if (tid < K) {
#pragma unroll
      for (int j = 0; j < 4; ++j) cw[j] = p.conv_w[(0 * 4 + j) * D + cq], cw[4 + j] = p.conv_w[(1 * 4 + j) * D + cq];
      cb[0] = p.conv_b ? p.conv_b[cq] : 0.f, cb[1] = p.conv_b ? p.conv_b[ck] : 0.f;
    } else if (tid < K + RC) {
#pragma unroll
      for (int j = 0; j < 4; ++j) cw[j] = p.conv_w[(2 * 4 + j) * D + (cv - 2 * D)];
      cb[0] = p.conv_b ? p.conv_b[cv] : 0.f;
    }
  };
  auto load_window = [&] {  // q ≥ 2 (q = 1: the first wave below)
    if (tid < K) {
      ChannelWindow(p, r.win_in, cq).load3(off, w0);
      ChannelWindow(p, r.win_in, ck).load3(off, w1);
      x0 = ld_bf16(p.qkv + row_base * p.qkv_row + cq);
      x1 = ld_bf16(p.qkv + row_base * p.qkv_row + ck);
    } else if (tid < K + RC) {
      ChannelWindow(p, r.win_in, cv).load3(off, w0);
      w1[0] = w1[1] = w1[2] = 0.f;
      x0 = ld_bf16(p.qkv + row_base * p.qkv_row + cv);
    }
  };
  // q = 1 without the F_B dot: one thread per gate row, in the v-channel warps (threads
  // K…2K−1, whose conv is the lighter), instead of two (the halves of mode 0's dot)
  const bool gate_one_thread = T::kQ == 1 && !gate_from_fb;
  const int grow = gate_one_thread ? tid & (K - 1) : gi;
  const bool gwriter = gate_one_thread ? (NARROW || tid >= K) : gpart == 0;
  float z1 = 0.f;
  if constexpr (T::kQ == 1) {
    // NOTES: the first wave. Every input a thread reads before the staged-inputs barrier is
    // loaded in one straight block per thread role, before any of it is used: a use waits for
    // its load, and a load placed after that use (a later loop or branch) waits with it, one
    // dependent round trip per such block (window, then gate logit, then f_a, then out gate).
    static_assert(kRank == K, "f_a staged one element per q/k-channel thread");
    if constexpr (NARROW) {
      // NOTES: the narrow form (T::kNarrow; heuristics::narrow_step has the measurements). The six-CTA bf16
      // kernel is bound by each item's dependent chain, and at 40 registers no more CTAs of 256 threads fit an
      // SM. Here a CTA has 128 threads: each thread loads, convolves and stores the window of the q, k and v
      // channel of its index and computes the gate of that row (the 256-thread form splits those over two
      // threads), its four warps take the rows of each chunk (cuda_config::kNarrowChunkRows: 16, four a warp, three
      // in flight: heuristics::kNarrowStages), and eight CTAs fit an SM: a longer chain per item, more items in
      // flight. Every value takes the same operations as in the 256-thread form, so the bits are the same
      // (CudaVsCpu.Bf16NarrowFormEqualsSixCtaForm).
      // Here: every load of the first wave (windows and x of three channels, the gate logit, the out gate, β of
      // thread 0, the per-token slot of thread 32), then their conversions.
      const ChannelWindow a(p, r.win_in, cq), k(p, r.win_in, ck), v(p, r.win_in, cv);
      uint32_t ra[3], rk[3], rv[3];
      a.raw3(off, ra);
      k.raw3(off, rk);
      v.raw3(off, rv);
      const uint16_t* xr = p.qkv + row_base * p.qkv_row;
      const uint16_t xq = xr[cq], xk = xr[ck], xv = xr[cv];
      const bool og_here = p.output_norm;
      const uint16_t og = og_here ? p.out_gate[row_base * p.out_gate_row + h * K + tid] : uint16_t(0);
      const uint16_t bt = tid == 0 ? p.beta[row_base * p.beta_row + h] : uint16_t(0);
      const int32_t ts = kind_is<KINDS, StepMode::kPerToken>(mode) && tid == 32 ? int32_t(slot_at(p, b, 0)) : 0;
      if (gate_from_ws) {
        cudaGridDependencySynchronize();  // the late wait: the gate kernel's logits
        z1 = p.gate_ws[row_base * p.gate_ws_row + h * K + grow];
      } else {
        z1 = ld_bf16(p.gate_in + row_base * p.gate_in_row + h * K + grow);
      }
#pragma unroll
      for (int j = 0; j < 3; ++j) w0[j] = a.value(ra[j]), w1[j] = k.value(rk[j]), wv[j] = v.value(rv[j]);
      x0 = bf16_to_f32(xq), x1 = bf16_to_f32(xk), xv0 = bf16_to_f32(xv);
      if constexpr (T::kFirstStagesAfterWindow) {
        if (tid == 0) {  // (NOTES: the first stages after the window, below)
          asm volatile("" ::"f"(w0[0]), "f"(w0[1]), "f"(w0[2]), "f"(w1[0]), "f"(wv[0]), "f"(x0), "f"(x1), "f"(xv0));
          issue_first_stages();
        }
      }
      if (og_here) s_og[tid] = sigmoidf_<T::kApproxRcp>(bf16_to_f32(og));
      if (tid == 0) s_beta[0] = sigmoidf_<T::kApproxRcp>(bf16_to_f32(bt));
      if (kind_is<KINDS, StepMode::kPerToken>(mode) && tid == 32) s_tslots[0] = ts;
    } else if (tid < K) {
      // q and k channel: window, x, and the inputs staged by threads 0–127 (f_a of mode 0, the
      // out gate of the own rows, beta, the per-token slot)
      const ChannelWindow a(p, r.win_in, cq), k(p, r.win_in, ck);
      uint32_t ra[3], rk[3];
      a.raw3(off, ra);
      k.raw3(off, rk);
      const uint16_t xq = p.qkv[row_base * p.qkv_row + cq], xk = p.qkv[row_base * p.qkv_row + ck];
      const bool og_here = p.output_norm && tid < RC;
      const uint16_t og = og_here ? p.out_gate[row_base * p.out_gate_row + h * K + rank * RC + tid] : uint16_t(0);
      const uint16_t fa = gate_from_fb ? p.gate_in[row_base * p.gate_in_row + tid] : uint16_t(0);
      const uint16_t bt = tid == 0 ? p.beta[row_base * p.beta_row + h] : uint16_t(0);
      const int32_t ts = kind_is<KINDS, StepMode::kPerToken>(mode) && tid == 32 ? int32_t(slot_at(p, b, 0)) : 0;
#pragma unroll
      for (int j = 0; j < 3; ++j) w0[j] = a.value(ra[j]), w1[j] = k.value(rk[j]);
      x0 = bf16_to_f32(xq), x1 = bf16_to_f32(xk);
      if constexpr (T::kFirstStagesAfterWindow) {
        // NOTES: the first stages after the window. Every CTA of the grid's first wave issues its
        // first stages' state copies at the same moment (17 MB with two 16 KiB stages, four CTAs
        // per SM), and each item's window loads, issued right after, queue behind them: the
        // timeline put the first wave's prologue at 9–10.8 µs against 3 µs for one item alone.
        // Here thread 0 issues the copies once its own window and x values are in registers, so
        // the grid's window loads reach DRAM ahead of its state bytes. (fp32 gate mode 2, 3072
        // items: first-wave prologue 9.0 → 3.4 µs, but the step no faster than with the conv taps
        // early alone, so that kernel keeps the copies at the request; docs/data/ladder_s53/run1.)
        // The asm makes the values' arrival the copies' dependency: fp32 windows need no
        // conversion whose use would otherwise be the wait.
        if (tid == 0) {
          asm volatile("" ::"f"(w0[0]), "f"(w0[1]), "f"(w0[2]), "f"(w1[0]), "f"(x0), "f"(x1));
          issue_first_stages();  // (run: pads have returned above)
        }
      }
      if (og_here) s_og[tid] = sigmoidf_<T::kApproxRcp>(bf16_to_f32(og));
      if (gate_from_fb) s_fa[tid] = bf16_to_f32(fa);
      if (tid == 0) s_beta[0] = sigmoidf_<T::kApproxRcp>(bf16_to_f32(bt));
      if (kind_is<KINDS, StepMode::kPerToken>(mode) && tid == 32) s_tslots[0] = ts;
    } else {
      // v channel (threads K…K+RC−1): window and x; gate row tid − K (modes 1 and 2)
      const bool v_here = tid < K + RC;
      const ChannelWindow a(p, r.win_in, v_here ? cv : 0);
      uint32_t ra[3] = {0, 0, 0};
      if (v_here) a.raw3(off, ra);
      const uint16_t xv = v_here ? p.qkv[row_base * p.qkv_row + cv] : uint16_t(0);
      if (gate_from_ws) {
        cudaGridDependencySynchronize();  // the late wait: the gate kernel's logits
        z1 = p.gate_ws[row_base * p.gate_ws_row + h * K + grow];
      } else if (!gate_from_fb)
        z1 = ld_bf16(p.gate_in + row_base * p.gate_in_row + h * K + grow);
#pragma unroll
      for (int j = 0; j < 3; ++j) w0[j] = a.value(ra[j]), w1[j] = 0.f;
      x0 = bf16_to_f32(xv);
    }
  } else {
    if constexpr (T::kEarlyTokenInputs) {
      // NOTES: the q ≥ 2 first wave. Every load of a batch of WB tokens — the window's raw
      // bits, the x of the batch's tokens, and (first batch) β and the per-token slots — is
      // issued before any of it is converted: a conversion waits for its load, and a load issued
      // after it waits with it, one round trip per token when each token's x was converted before
      // the next was loaded. The fused step's profile had 20% of its stall samples at those first
      // uses; issuing them together took record q = 4 6–9% and fused 4–6% off (H = 96, one to
      // 256 requests), fused q = 8 7% (docs/PERFORMANCE.md, "The q ≥ 2 first wave"). With q at
      // run time the batch is kWaveTokens tokens, the loads beyond q predicated off (with q known
      // at compile time the tests on q fold away).
      constexpr int WB = T::kWaveTokens;
      const bool bt_here = tid < q;  // β of token tid
      const bool ts_here = kind_is<KINDS, StepMode::kPerToken>(mode) && tid >= 32 && tid < 32 + q;
      uint16_t bt = 0;
      int32_t ts = 0;
      if (tid < K) {
        const ChannelWindow a(p, r.win_in, cq), k(p, r.win_in, ck);
        uint32_t ra[3], rk[3];
        a.raw3(off, ra);
        k.raw3(off, rk);
        if constexpr (T::kEarlyConvWeights) load_conv_weights();
        if (bt_here) bt = p.beta[(row_base + tid) * p.beta_row + h];
        if (ts_here) ts = int32_t(slot_at(p, b, tid - 32));
        for (int t0 = 0; t0 < q; t0 += WB) {
          uint16_t xq[WB], xk[WB];
#pragma unroll
          for (int j = 0; j < WB; ++j) {
            if (t0 + j < q) {
              const uint16_t* xr = p.qkv + (row_base + t0 + j) * p.qkv_row;
              xq[j] = xr[cq], xk[j] = xr[ck];
            }
          }
          if (t0 == 0) {
#pragma unroll
            for (int j = 0; j < 3; ++j) w0[j] = a.value(ra[j]), w1[j] = k.value(rk[j]);
            x0 = bf16_to_f32(xq[0]), x1 = bf16_to_f32(xk[0]);
          }
#pragma unroll
          for (int j = 0; j < WB; ++j) {
            const int t = t0 + j;
            if (t > 0 && t < q) s_yq[t * K + tid] = bf16_to_f32(xq[j]), s_yk[t * K + tid] = bf16_to_f32(xk[j]);
          }
        }
      } else if (tid < K + RC) {
        const ChannelWindow a(p, r.win_in, cv);
        uint32_t ra[3];
        a.raw3(off, ra);
        if constexpr (T::kEarlyConvWeights) load_conv_weights();
        for (int t0 = 0; t0 < q; t0 += WB) {
          uint16_t xv[WB];
#pragma unroll
          for (int j = 0; j < WB; ++j)
            if (t0 + j < q) xv[j] = p.qkv[(row_base + t0 + j) * p.qkv_row + cv];
          if (t0 == 0) {
#pragma unroll
            for (int j = 0; j < 3; ++j) w0[j] = a.value(ra[j]), w1[j] = 0.f;
            x0 = bf16_to_f32(xv[0]);
          }
#pragma unroll
          for (int j = 0; j < WB; ++j) {
            const int t = t0 + j;
            if (t > 0 && t < q) s_yv[t * RC + vj] = bf16_to_f32(xv[j]);
          }
        }
      }
      // the out gate of the CTA's rows, read in the epilogue (StepSmem::late_out_gate): its lines
      // prefetched into L1 now, so the epilogue's loads hit there instead of ending the item's
      // chain with one more round trip (three addresses per token cover RC ≤ 128 bf16 at any
      // 16-byte alignment of the row)
      if (p.output_norm && tid >= K && tid < K + 3 * q) {
        const int t = (tid - K) / 3, part = (tid - K) % 3;
        const int c = part == 0 ? 0 : part == 1 ? (RC > 64 ? 64 : RC - 1) : RC - 1;
        asm volatile(
            "prefetch.global.L1 [%0];" ::"l"(p.out_gate + (row_base + t) * p.out_gate_row + h * K + rank * RC + c));
      }
      if (bt_here) s_beta[tid] = sigmoidf_<T::kApproxRcp>(bf16_to_f32(bt));
      if (ts_here) s_tslots[tid - 32] = ts;
      // the raw logits of the q tokens (gate modes 1 and 2), activated in place at the gate:
      // loaded in batches (each thread GB elements of WB tokens) before they are stored
      if (gate_from_ws) cudaGridDependencySynchronize();  // the late wait: the gate kernel's logits
      constexpr int GB = (WB * K + NT - 1) / NT;
      for (int i0 = tid; i0 < q * K; i0 += GB * NT) {
        float z[GB];
#pragma unroll
        for (int j = 0; j < GB; ++j) {
          const int i = i0 + j * NT;
          if (i < q * K) {
            const int64_t row = row_base + i / K;
            z[j] = gate_from_ws ? p.gate_ws[row * p.gate_ws_row + h * K + i % K]
                                : bf16_to_f32(p.gate_in[row * p.gate_in_row + h * K + i % K]);
          }
        }
#pragma unroll
        for (int j = 0; j < GB; ++j)
          if (i0 + j * NT < q * K) s_g[i0 + j * NT] = z[j];
      }
    }
    if (gate_from_fb)
      for (int i = tid; i < q * kRank; i += NT)
        s_fa[i] = ld_bf16(p.gate_in + (row_base + i / kRank) * p.gate_in_row + i % kRank);
    // (q >= 2 reads the out gate in the epilogue instead: StepSmem::late_out_gate)
    if constexpr (!T::kEarlyTokenInputs) {
      if (tid < q) s_beta[tid] = sigmoidf_<T::kApproxRcp>(ld_bf16(p.beta + (row_base + tid) * p.beta_row + h));
      if (kind_is<KINDS, StepMode::kPerToken>(mode) && tid >= 32 && tid < 32 + q)
        s_tslots[tid - 32] = int32_t(slot_at(p, b, tid - 32));
    }
  }
  // NOTES: the shared gate's inputs. A barrier that only the gate slice's threads waited on (its
  // stagers, the q / k conv threads, arriving and going on) was 0.3–1.6% faster at one request than
  // this one (docs/data/ladder_s42/run2, rung gt2 against gt), but racecheck reported hazards in
  // Split 8 with it (docs/data/ladder_s43/run4) and it is not kept until they are understood.
  // NOTES: the staged inputs' barrier. Without the F_B dot, Wide at q = 1 and the first wave of q >= 2 read
  // nothing another thread staged above before the barrier after the conv: the conv and the gate run on a
  // thread's own first-wave registers or on the staged elements it wrote itself (element i of s_yq / s_yk / s_yv /
  // s_g by thread i mod NT); the out gate, β and the per-token slots are read after the conv's barrier. Only the
  // F_B dot (f_a, gate mode 0) and Split's ranks read across threads here. Without this barrier (H200), record
  // at one request ran 0.6-2.4% faster, record q = 2 at 2-64 requests 1.9-3.0%, fp32 append Qr = 8 0.9-1.8%, fused
  // q = 2 up to 1.8%, fused q = 4 and per_token within +-0.5%; decode 0.5-0.8% faster at six of seven points of
  // 96-768 items but up to 0.24% (fp32) and 0.5% (bf16) slower from 3072, so the kernels of decode and per_token alone
  // (kStoringStepKinds) keep it (docs/data/ladder_s50/run1, rung nb).
  if (!T::kStagedBarrierForFbOnly || gate_from_fb) sync_main();  // staged inputs
  if (share_gate) ptx::barrier_cluster_wait();                   // every rank has started (its gate_full initialised)

  // ---- gate: z = F_B[h·128 + i]·f_a (mode 0, two threads per gate row i) or the raw gate
  //      (q = 1: one thread per row; q >= 2 without the F_B path: the staged logits,
  //      elementwise) ----------------------------------------------------------------------
  {
    const float a = exp_(T::kEarlyWeights ? a_log : p.A_log[h]);
    const float dtb = T::kEarlyWeights ? dtb_w : p.dt_bias[h * K + grow];
    const bool lb = p.has_lower_bound != 0;
    if constexpr (T::kQ != 1) {
      if (gate_from_fb) {
        const uint4* src = reinterpret_cast<const uint4*>(fb_src);
#pragma unroll
        for (int j = 0; j < 8; ++j) fb[j] = src[j];
      }
    }
    if constexpr (T::kEarlyTokenInputs) {
      // the staged logits, every thread on its own (token, row) elements (NT is a multiple of K)
      for (int i = tid; i < q * K; i += NT) {
        const float g = activate_gate<T::kApproxRcp>(
            s_g[i] + (T::kEarlyWeights ? dtb_w : p.dt_bias[h * K + (tid & (K - 1))]), a, lb, p.lower_bound);
        s_g[i] = g;
        s_e[i] = decay_of(g);
      }
    } else {
      for (int t = 0; t < q; ++t) {
        float z;
        if (gate_from_fb) {
          if (!gate_here) continue;  // (the shared gate: whole warps)
          z = gate_dot_f4<8>(fb, reinterpret_cast<const float4*>(s_fa + t * kRank + gpart * (kRank / 2)));
          z += __shfl_xor_sync(0xffffffffu, z, 1);
        } else if (T::kQ == 1) {
          z = z1;
        } else if (gate_from_ws) {
          z = p.gate_ws[(row_base + t) * p.gate_ws_row + h * K + gi];
        } else {
          z = ld_bf16(p.gate_in + (row_base + t) * p.gate_in_row + h * K + gi);
        }
        if (share_gate) {
          if (gwriter)  // (the rows outside the rank's slice left above)
            store_all_ranks_async<SPLIT>(s_g, t * K + grow, activate_gate<T::kApproxRcp>(z + dtb, a, lb, p.lower_bound),
                                         &gate_full);
        } else if (gwriter) {
          const float g = activate_gate<T::kApproxRcp>(z + dtb, a, lb, p.lower_bound);
          s_g[t * K + grow] = g;
          if constexpr (T::kLeanVectors || T::kQ != 1) s_e[t * K + grow] = decay_of(g);
        }
      }
    }
  }

  // ---- conv + SiLU. New window columns are written once the old ones are read (SPLIT > 1:
  //      the q/k columns, read by every rank, are staged for rank 0) ----------------------------
  if constexpr (T::kQ != 1 && !T::kEarlyTokenInputs) load_window();
  // (the q / k channel of threads 0–127, the own v channel of threads 128…; the narrow form: both, every thread)
  auto conv_qk = [&] {
    float wq[4], wk[4], bq, bk;
    if constexpr (T::kConvWeightsBeforeWait) {
#pragma unroll
      for (int j = 0; j < 4; ++j) wq[j] = cwe[j], wk[j] = cwe[4 + j];
      bq = cbe[0], bk = cbe[1];
    } else if constexpr (T::kEarlyConvWeights) {
#pragma unroll
      for (int j = 0; j < 4; ++j) wq[j] = cw[j], wk[j] = cw[4 + j];
      bq = cb[0], bk = cb[1];
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        wq[j] = p.conv_w[(0 * 4 + j) * D + cq];
        wk[j] = p.conv_w[(1 * 4 + j) * D + cq];
      }
      bq = p.conv_b ? p.conv_b[cq] : 0.f, bk = p.conv_b ? p.conv_b[ck] : 0.f;
    }
    float q0 = w0[0], q1 = w0[1], q2 = w0[2], k0 = w1[0], k1 = w1[1], k2 = w1[2];
    float* stq = s_win + tid * WC;
    float* stk = s_win + (K + tid) * WC;
    const ChannelWindow oq(p, r.win_out, cq), ok(p, r.win_out, ck);  // (SPLIT > 1: rank 0 writes them last)
    if constexpr (SPLIT == 1) {
      oq.store(0, q1);
      oq.store(1, q2);
      ok.store(0, k1);
      ok.store(1, k2);
    } else if (rank == 0) {
      stq[0] = q1, stq[1] = q2, stk[0] = k1, stk[1] = k2;
    }
    for (int t = 0; t < q; ++t) {
      float xq, xk;
      if constexpr (T::kEarlyTokenInputs) {
        xq = t == 0 ? x0 : s_yq[t * K + tid], xk = t == 0 ? x1 : s_yk[t * K + tid];
      } else {
        const uint16_t* xr = p.qkv + (row_base + t) * p.qkv_row;
        xq = t == 0 ? x0 : ld_bf16(xr + cq), xk = t == 0 ? x1 : ld_bf16(xr + ck);
      }
      if constexpr (SPLIT == 1) {
        oq.store(2 + t, xq);
        ok.store(2 + t, xk);
      } else if (rank == 0) {
        stq[2 + t] = xq, stk[2 + t] = xk;
      }
      float aq = bq, ak = bk;
      aq = fmaf(wq[0], q0, aq), ak = fmaf(wk[0], k0, ak);
      aq = fmaf(wq[1], q1, aq), ak = fmaf(wk[1], k1, ak);
      aq = fmaf(wq[2], q2, aq), ak = fmaf(wk[2], k2, ak);
      aq = fmaf(wq[3], xq, aq), ak = fmaf(wk[3], xk, ak);
      const float yq = silu<T::kApproxRcp>(aq), yk = silu<T::kApproxRcp>(ak);
      s_yq[t * K + tid] = yq;
      s_yk[t * K + tid] = yk;
      if constexpr (T::kQ == 1) {  // q >= 2: summed per token (below)
        const float sq = warp_sum(yq * yq), sk = warp_sum(yk * yk), sqk = warp_sum(yq * yk);
        if (lane == 0) {
          s_part[t * 12 + warp * 3 + 0] = sq;
          s_part[t * 12 + warp * 3 + 1] = sk;
          s_part[t * 12 + warp * 3 + 2] = sqk;
        }
      }
      q0 = q1, q1 = q2, q2 = xq;
      k0 = k1, k1 = k2, k2 = xk;
    }
  };
  auto conv_v = [&] {
    float w[4], bias;
    if constexpr (T::kConvWeightsBeforeWait && NARROW) {
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) w[jj] = cwe[8 + jj];
      bias = cbe[2];
      w0[0] = wv[0], w0[1] = wv[1], w0[2] = wv[2], x0 = xv0;  // (the q channel's are used above)
    } else if constexpr (T::kConvWeightsBeforeWait) {
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) w[jj] = cwe[jj];
      bias = cbe[0];
    } else if constexpr (T::kEarlyConvWeights) {
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) w[jj] = cw[jj];
      bias = cb[0];
    } else {
      const int cc = cv - 2 * D;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) w[jj] = p.conv_w[(2 * 4 + jj) * D + cc];
      bias = p.conv_b ? p.conv_b[cv] : 0.f;
    }
    float h0 = w0[0], h1 = w0[1], h2 = w0[2];
    const ChannelWindow ov(p, r.win_out, cv);
    ov.store(0, h1);
    ov.store(1, h2);
    for (int t = 0; t < q; ++t) {
      const float x = t == 0                 ? x0
                      : T::kEarlyTokenInputs ? s_yv[t * RC + vj]
                                             : ld_bf16(p.qkv + (row_base + t) * p.qkv_row + cv);
      ov.store(2 + t, x);
      float a = bias;
      a = fmaf(w[0], h0, a);
      a = fmaf(w[1], h1, a);
      a = fmaf(w[2], h2, a);
      a = fmaf(w[3], x, a);
      s_yv[t * RC + vj] = silu<T::kApproxRcp>(a);
      h0 = h1, h1 = h2, h2 = x;
    }
  };
  if constexpr (NARROW) {
    conv_qk();
    conv_v();
  } else if constexpr (T::kConvTwoTests) {
    if (tid < K) conv_qk();
    if (tid >= K && tid < K + RC) conv_v();
  } else if (tid < K) {
    conv_qk();
  } else if (tid < K + RC) {
    conv_v();
  }

  // ---- staged records (fused / append): wait for them, replace g by e = exp(g) ------------
  if (npend > 0) {
    mbar_wait(&rec_full, 0);  // (with fold warps too: this step's records overwrite them in global memory)
    if (!fold_on) records_decays(tid, NT);
  }
  sync_main();                               // y, g, norm partials and the staged records
  if (share_gate) mbar_wait(&gate_full, 0);  // every rank's gates

  // ---- token vectors: q = 1 in registers (the lane's columns); else the token groups'
  //      operands in shared memory (Γ⊙y_k, Γ⊙y_q, M / N, the norms), one more barrier ----------
  float4 k4, q4, e4;
  float kq1 = 0.f, ik1 = 0.f, iq1 = 0.f;
  if constexpr (T::kLeanVectors && !T::kLeanOwnHalf) {
    const TokenNorms n = token_norms(s_part, 0);
    ik1 = n.ik;
    iq1 = n.iq;
    kq1 = n.qk * n.ik * n.iq * kQScale;
  } else if constexpr (T::kLeanOwnHalf) {
    const TokenNorms n = token_norms(s_part, 0);
    kq1 = n.qk * n.ik * n.iq * kQScale;
    // NOTES: the lean vectors. The row loop reads k and q from shared memory per chunk. Warp 0
    // scales them there once (the register path's roundings: y_k · 1/|y_k|, (y_q · 1/|y_q|) ·
    // scale) instead of every warp at every chunk, and lays them out by reduction half: s_yq
    // holds, at the columns of lanes 0–15, k and at those of lanes 16–31, q (the vector whose
    // dot products the lane keeps at the reduction's first level), s_yk the other. So every lane
    // reads its two operands at its own columns of two fixed buffers and the first level needs
    // no selects (delta_rows_own_half; the same sums in the same order, so the same bits). They
    // are released on vec_full, which the warps wait on at their first chunk, its rows loaded: no
    // CTA barrier. (write_key_gate's k is read by the lanes of warp 0 that wrote it.) The row loop
    // is 9% shorter (bf16 decode: 256 against 281 SASS instructions per chunk), and bf16 append
    // Qr = 8 runs 3–5% faster on the H200 and on an H100, fp32 append Qr = 8 1.1–2.3% on the H200
    // (a tie on an H100; the H200's figures are of the form that waited before the chunk loop).
    // bf16 decode lost 0.7–3.8% from 3072 items (H200) and 0.1–1.6% (H100) with it: the hand-over
    // puts warp 0's scaling on every warp's chain, and its key, read again for the update, one
    // more shared-memory round trip; so the kernels of the storing kinds keep the scaling per
    // chunk (T::kLeanOwnHalf; docs/data/ladder_s49/run1, run2).
    if (warp == 0) {
      float4* const a = reinterpret_cast<float4*>(s_yq) + lane;
      float4* const b = reinterpret_cast<float4*>(s_yk) + lane;
      const float4 yq = *a, yk = *b;
      const float4 kk = make_float4(yk.x * n.ik, yk.y * n.ik, yk.z * n.ik, yk.w * n.ik);
      const float4 qq =
          make_float4(yq.x * n.iq * kQScale, yq.y * n.iq * kQScale, yq.z * n.iq * kQScale, yq.w * n.iq * kQScale);
      *a = lane < 16 ? kk : qq;
      *b = lane < 16 ? qq : kk;
      ptx::mbarrier_arrive(ptx::sem_release, ptx::scope_cta, ptx::space_shared, vec_full);
    }
  } else if constexpr (T::kQ == 1) {
    const TokenNorms n = token_norms(s_part, 0);
    const float4 yk = *reinterpret_cast<const float4*>(s_yk + lane * 4);
    const float4 yq = *reinterpret_cast<const float4*>(s_yq + lane * 4);
    const float4 g4 = *reinterpret_cast<const float4*>(s_g + lane * 4);
    k4 = make_float4(yk.x * n.ik, yk.y * n.ik, yk.z * n.ik, yk.w * n.ik);
    q4 = make_float4(yq.x * n.iq * kQScale, yq.y * n.iq * kQScale, yq.z * n.iq * kQScale, yq.w * n.iq * kQScale);
    e4 = make_float4(decay_of(g4.x), decay_of(g4.y), decay_of(g4.z), decay_of(g4.w));
    kq1 = n.qk * n.ik * n.iq * kQScale;
  } else {
    // q >= 2 (NOTES: token groups): per channel, Γ = the decays since the token's group
    // began; thread c (side 0) writes Γ⊙y_k of channel c, thread 128 + c (side 1) Γ⊙y_q. The
    // norms scale the group's totals instead (1/|y_k|, 1/|y_q|·scale per token: s_nrm), so
    // they are formed once per token, below, not per thread and token.
    {
      const int c = tid & (K - 1), side = tid >> 7;
      const float* y = side ? s_yq : s_yk;
      float G = 1.f;
      for (int t = 0; t < q; ++t) {
        if (t % cuda_config::kTokenGroup == 0) G = 1.f;
        G *= s_e[t * K + c];
        s_kgq[token_group_store_row<RPW>(c >> 2, side, t, q, qg) * K + c] = G * y[t * K + c];
      }
      for (int t = q; t < qg; ++t) s_kgq[token_group_store_row<RPW>(c >> 2, side, t, q, qg) * K + c] = 0.f;
    }
    // The token norms and in-group coefficients: for a token t and each earlier token j = t0 + jj
    // of its group,
    //   M[t][jj] = Σ_c k_j k_t Π_{j<τ≤t} e_τ,  N[t][jj] = Σ_c k_j q_t Π_{j<τ≤t} e_τ;  N[t][t − t0] = k_t·q_t
    // 1/|y| of a token's vector, the lane holding four of its channels (fixed order: every warp
    // that sums a token gets the same bits; 1/|y_k| of earlier tokens is summed again where a
    // pair needs it: cheaper than a barrier)
    auto inv_norm = [](const float4& y) { return inv_sqrt_(warp_sum(dot4(y, y)) + kL2Eps); };
    // the lane's four channels of token t's row of a [q][K] operand
    auto row4 = [&](const float* s, int t) { return load_smem_row4(s + t * K + lane * 4); };
    // the pair (t, jj) from P = Π_{j<τ≤t} e_τ of the lane's channels
    auto store_pair = [&](int t, int jj, const float4& P, const float4& ykt, const float4& yqt, float ikt, float iqs) {
      const float4 ykj = row4(s_yk, t - t % cuda_config::kTokenGroup + jj);
      const float4 x = make_float4(ykj.x * P.x, ykj.y * P.y, ykj.z * P.z, ykj.w * P.w);
      const float m = warp_sum(dot4(x, ykt)), nn = warp_sum(dot4(x, yqt));
      const float ikj = inv_norm(ykj);
      if (lane == 0) {
        s_mn[t * 8 + jj] = m * ikj * ikt;
        s_mn[t * 8 + 4 + jj] = nn * ikj * iqs;
      }
    };
    // token t's own: its norms and N[t][t − t0] = kq
    auto store_token = [&](int t, float kq, float ikt, float iqs) {
      if (lane == 0) {
        s_mn[t * 8 + 4 + t % cuda_config::kTokenGroup] = kq;
        s_nrm[t] = ikt;
        s_nrm[kMaxQ + t] = iqs;
      }
    };
    if constexpr (T::kQ == 3 || T::kQ == 4) {
      // NOTES: one group of three or four tokens: one warp per pair (t, jj) and one for token 0,
      // four or seven warps side by side. With one warp per token, the group's last token ran its
      // three pairs one after another while the other warps waited at the barrier below (10% of
      // the stall samples of record q = 4 at one request): record q = 3 and 4 up to 2.5% faster, fused
      // up to 5%; q = 8 (two groups over eight warps either way) was 0.5–1.8% slower with its 14 pairs
      // over the warps, q = 2 spills with them (docs/PERFORMANCE.md, "Session 25").
      constexpr int kTasks = T::kQ * (T::kQ - 1) / 2 + 1;  // (t, jj): (0, −), (1, 0), (2, 0), (2, 1), (3, 0), …
      if (warp < kTasks) {
        const int t = warp == 0 ? 0 : warp == 1 ? 1 : warp <= 3 ? 2 : 3;
        const int jj = warp == 0 ? -1 : warp - t * (t - 1) / 2 - 1;  // −1: token 0's norms only
        const float4 ykt = row4(s_yk, t);
        const float4 yqt = row4(s_yq, t);
        const float ikt = inv_norm(ykt);
        const float iqs = inv_norm(yqt) * kQScale;
        if (jj >= 0) {
          float4 P = make_float4(1.f, 1.f, 1.f, 1.f);  // e_t first, as the per-token loop below
          for (int l = t - 1; l >= jj; --l) {
            const float4 e4 = row4(s_e, l + 1);
            P = make_float4(P.x * e4.x, P.y * e4.y, P.z * e4.z, P.w * e4.w);
          }
          store_pair(t, jj, P, ykt, yqt, ikt, iqs);
        }
        if (jj == t - 1) store_token(t, warp_sum(dot4(yqt, ykt)) * ikt * iqs, ikt, iqs);
      }
    } else {
      // one warp per token t: its norms, then its pairs from jj = tt − 1 down
      for (int t = warp; t < q; t += T::kWarps) {
        const int tt = t % cuda_config::kTokenGroup;
        const float4 ykt = row4(s_yk, t);
        const float4 yqt = row4(s_yq, t);
        const float ikt = inv_norm(ykt);
        const float iqs = inv_norm(yqt) * kQScale;
        const float kq = warp_sum(dot4(yqt, ykt)) * ikt * iqs;
        float4 P = make_float4(1.f, 1.f, 1.f, 1.f);
        for (int jj = tt - 1; jj >= 0; --jj) {
          const float4 e4 = row4(s_e, t - tt + jj + 1);
          P = make_float4(P.x * e4.x, P.y * e4.y, P.z * e4.z, P.w * e4.w);
          store_pair(t, jj, P, ykt, yqt, ikt, iqs);
        }
        store_token(t, kq, ikt, iqs);
      }
    }
    sync_main();
  }

  // ---- records out: k_t, g_t (rank 0; SPLIT > 1 once every rank's partials have landed) ---
  const bool full_row = kind_is<KINDS, StepMode::kAppend>(mode) && npend == p.Qr;         // fold, write back, new row
  const int pos0 = kind_is<KINDS, StepMode::kAppend>(mode) ? (full_row ? 0 : npend) : 0;  // record of token 0
  auto write_key_gate = [&] {
    float* kg = p.key_gate + int64_t(r.row) * p.key_gate_row + (int64_t(h) * p.Qr + pos0) * 2 * K;
    for (int i = tid; i < q * 64; i += NT) {
      const int t = i / 64, c4 = i % 64;
      float4 v;
      if (c4 < 32) {
        if constexpr (T::kLeanOwnHalf) {  // scaled already, by this lane (NOTES: the lean vectors)
          v = *reinterpret_cast<const float4*>((c4 < 16 ? s_yq : s_yk) + c4 * 4);
        } else {
          v = *reinterpret_cast<const float4*>(s_yk + t * K + c4 * 4);
          const float ik = T::kQ == 1 ? token_norms(s_part, t).ik : s_nrm[t];  // k = y_k · 1/|y_k|
          v = make_float4(v.x * ik, v.y * ik, v.z * ik, v.w * ik);
        }
      } else {
        v = *reinterpret_cast<const float4*>(s_g + t * K + (c4 - 32) * 4);
      }
      *reinterpret_cast<float4*>(kg + t * 2 * K + c4 * 4) = v;
    }
  };
  if constexpr (SPLIT == 1)
    if (records) write_key_gate();

  // ---- the rows: chunk by chunk as the bulk copies land --------------------------------------
  float* corr_out =
      records ? p.correction + int64_t(r.row) * p.correction_row + (int64_t(h) * p.Qr + pos0) * K : nullptr;
  const bool write_ck = !fold_on && ((kind_is<KINDS, StepMode::kFused>(mode) && npend > 0) || full_row);
  const int nfold = fold_on ? 0 : npend;                  // records folded here (fold warps: already in the stages)
  uint64_t* const chunk_ready = fold_on ? folded : full;  // the stage's barrier the rows wait on
  StateT* ck_tile = state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h) + int64_t(rank) * RC * K;
  StateT* out_tile = state_tile<StateT>(p.state, p.state_slot_stride, r.state_out, h) + int64_t(rank) * RC * K;
  const int urow = lane / G2;  // q = 1: the row whose u (lanes < 16) or o (lanes >= 16) this lane holds
  const bool writer = (lane % G2) == 0;
  // q >= 2: the tile's register r holds the warp's row tile_row(lane, r) (TokenGroupLanes)
  auto trow = [&](int r) { return T::kQ == 1 ? r : tile_row<RPW>(lane, r); };
  // One pass over NP chunks: chunks c … c + NP − 1 in stages s … s + NP − 1 (NP > 1: every chunk
  // in flight, so no refills). Each chunk's rows take the same operations in the same order
  // either way; NP > 1 only gives a warp independent tiles to interleave.
  auto pass = [&](auto np_, auto update_, int c, int& s, uint32_t& phase) {
    constexpr int NP = decltype(np_)::value;
    [[maybe_unused]] constexpr bool kUpdate = decltype(update_)::value;  // q = 1: the rows advanced past the token
    const bool per_token = NP == 1 && kind_is<KINDS, StepMode::kPerToken>(mode);  // (NP > 1: never per_token)
    float4 S[NP][RPW];
    int crow[NP];  // first row of the warp within the CTA's rows, per tile
#pragma unroll
    for (int j = 0; j < NP; ++j) {
      mbar_wait(&chunk_ready[s + j], phase);
      if (c + j == 0) KDA_TL(tl[3]);
      crow[j] = (c + j) * CR + warp * RPW;
      const StateT* st =
          reinterpret_cast<const StateT*>(s_state + (s + j) * L.stage_bytes()) + (warp * RPW) * K + lane * 4;
#pragma unroll
      for (int i = 0; i < RPW; ++i) S[j][i] = load_smem_row4(st + trow(i) * K);
    }
    if (NP == 1 && c + stages < NCH) {
      // NOTES: the refill is a write by the async proxy (the bulk copy) after reads by the
      // generic proxy; bar.sync orders the threads' accesses among themselves only. So each
      // thread first waits for its loads' data (the asm consumes the registers) and fences
      // the proxies, then the barrier hands the stage to the copy. Without it a few rows of
      // an item could be read after the next chunk had landed (seen once in 120 GPU cases
      // with two stages).
#pragma unroll
      for (int i = 0; i < RPW; ++i) asm volatile("" ::"f"(S[0][i].x), "f"(S[0][i].y), "f"(S[0][i].z), "f"(S[0][i].w));
      ptx::fence_proxy_async(ptx::space_shared);
      sync_main();  // every warp has read stage s: refill it with chunk c + stages
      if (tid == 0) {
        const char* src =
            reinterpret_cast<const char*>(state_tile<StateT>(p.state, p.state_slot_stride, r.state_in, h)) +
            (int64_t(rank) * NCH + c + stages) * L.stage_bytes();
        ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[s],
                                       uint32_t(L.stage_bytes()));
        state_g2s(s_state + s * L.stage_bytes(), src, &full[s]);
      }
    }
    if ((s += NP) == stages) s = 0, phase ^= 1u;
    // fused / append: fold the pending records (S = fmaf(u, k, S·e), the token's roundings).
    // NOTES: q = 1 steps the operands' pointers once a record (crow[j] = crow[0] + j·CR) instead of
    // forming them from the record's index, one record an iteration: unrolled by four (36.25 SASS
    // instructions a record and chunk against 39) it spilled more and lost 0.5–1.5% at Qr = 12–16.
    if constexpr (T::kQ == 1) {
      const float* kg = s_reckg + lane * 4;
      const float* ur = s_recu + crow[0];
      const float* const kg_end = kg + nfold * 2 * K;
#pragma unroll 1
      for (; kg != kg_end; kg += 2 * K, ur += RC) {
        const float4 kk = *reinterpret_cast<const float4*>(kg);
        const float4 ee = *reinterpret_cast<const float4*>(kg + K);
#pragma unroll
        for (int j = 0; j < NP; ++j) fold_record_e<RPW>(S[j], ur + j * CR, kk, ee, trow(0));
      }
    } else {
      for (int pp = 0; pp < nfold; ++pp) {
        const float4 kk = *reinterpret_cast<const float4*>(s_reckg + pp * 2 * K + lane * 4);
        const float4 ee = *reinterpret_cast<const float4*>(s_reckg + pp * 2 * K + K + lane * 4);
#pragma unroll
        for (int j = 0; j < NP; ++j) fold_record_e<RPW>(S[j], s_recu + pp * RC + crow[j], kk, ee, trow(0));
      }
    }
    if (write_ck) {
#pragma unroll
      for (int j = 0; j < NP; ++j) {
        StateT* dst = ck_tile + int64_t(crow[j]) * K + lane * 4;
#pragma unroll
        for (int i = 0; i < RPW; ++i) {
          IO::store(dst + trow(i) * K, S[j][i]);
          S[j][i] = IO::stored(S[j][i]);  // continue from what was stored (SPEC §9)
        }
      }
    }
    if constexpr (T::kQ == 1) {
      static_assert(NP == 1, "q = 1 runs one chunk per pass");
      float kq = kq1;
      float u, o;
      if constexpr (T::kLeanVectors && !T::kLeanOwnHalf) {
        const float4 yk = *reinterpret_cast<const float4*>(s_yk + lane * 4);
        const float4 yq = *reinterpret_cast<const float4*>(s_yq + lane * 4);
        k4 = make_float4(yk.x * ik1, yk.y * ik1, yk.z * ik1, yk.w * ik1);
        // the same two roundings as the register path: (y_q · 1/|y_q|) · scale
        q4 = make_float4(yq.x * iq1 * kQScale, yq.y * iq1 * kQScale, yq.z * iq1 * kQScale, yq.w * iq1 * kQScale);
        e4 = *reinterpret_cast<const float4*>(s_e + lane * 4);
      }
      if constexpr (T::kLeanOwnHalf) {
        // the lane's own half (k for lanes 0–15, q for 16–31) and the other (NOTES: the lean vectors),
        // waited for once the first chunk's rows are in registers
        if (c == 0) mbar_wait(vec_full, 0);
        const float4 va = *reinterpret_cast<const float4*>(s_yq + lane * 4);
        const float4 vb = *reinterpret_cast<const float4*>(s_yk + lane * 4);
        e4 = *reinterpret_cast<const float4*>(s_e + lane * 4);
        const float* k_src = (lane < 16 ? s_yq : s_yk) + lane * 4;
        delta_rows_own_half<RPW>(S[0], va, vb, k_src, e4, s_beta[0], kq, s_yv + crow[0], lane, u, o, kUpdate);
      } else {
        delta_rows<RPW>(S[0], k4, q4, e4, s_beta[0], kq, s_yv + crow[0], lane, u, o, kUpdate);
      }
      if (writer) {
        if (lane < 16) {
          if (records) corr_out[rank * RC + crow[0] + urow] = u;
        } else {
          s_o[crow[0] + urow - RPW] = o;
        }
      }
      if (kUpdate && kind_is<KINDS, StepMode::kDecode>(mode))
        store_tile<StateT, RPW>(out_tile + int64_t(crow[0]) * K + lane * 4, S[0]);
      if (kUpdate && per_token) {
        const int32_t dslot = s_tslots[0];
        if (!is_pad_id(dslot, p.null_slot))
          store_tile<StateT, RPW>(
              state_tile<StateT>(p.state, p.state_slot_stride, dslot, h) + int64_t(rank * RC + crow[0]) * K + lane * 4,
              S[0]);
      }
    } else {
      // NOTES: token groups. Within a group of up to four tokens the products a_t = S·(Γ_t⊙k_t)
      // and b_t = S·(Γ_t⊙q_t) with the state as it was when the group began are independent,
      // so all 2·RPW·TG of them share one reduction; each row's recurrence over the group's
      // tokens then runs on the totals (token_group_solve). The state is advanced token by
      // token (S = fmaf(u, k, S·e), the fold's roundings) only where the step writes it
      // (per_token) or a later group needs it.
      auto group = [&](auto tg, int t0) {
        constexpr int TG = decltype(tg)::value;
        using GL = TokenGroupLanes<RPW, TG>;
        const GL gl(lane);
        const int n = q - t0 < TG ? q - t0 : TG;  // tokens of the group (TG = 4 may hold 3)
        const int t = t0 + gl.tok, tc = t < q ? t : q - 1;
        // a_t = S·(Γ⊙y_k)·1/|y_k|, b_t = S·(Γ⊙y_q)·1/|y_q|·scale
        float acc[NP], my_u[NP];
#pragma unroll
        for (int j = 0; j < NP; ++j)
          acc[j] = token_group_dots<RPW, TG>(S[j], s_kgq, qg, t0, lane) * s_nrm[gl.which * kMaxQ + tc];
        const float4 mn = *reinterpret_cast<const float4*>(s_mn + tc * 8 + gl.which * 4);
#pragma unroll
        for (int j = 0; j < NP; ++j)
          my_u[j] = token_group_solve<RPW, TG>(acc[j], s_yv[tc * RC + crow[j] + gl.row], s_beta[tc], mn, lane);
        if (GL::writer(lane) && gl.tok < n) {
#pragma unroll
          for (int j = 0; j < NP; ++j) {
            const int row = crow[j] + gl.row;
            if (gl.which == 0) {
              if (records) corr_out[t * K + rank * RC + row] = my_u[j];
            } else {
              s_o[t * RC + row] = acc[j];
            }
          }
        }
        if (per_token || t0 + TG < q) {
#pragma unroll
          for (int tt = 0; tt < TG; ++tt) {
            if (tt >= n) break;
            const int ta = t0 + tt;
            const float ik = s_nrm[ta];
            const float4 yk = *reinterpret_cast<const float4*>(s_yk + ta * K + lane * 4);
            const float4 kk = make_float4(yk.x * ik, yk.y * ik, yk.z * ik, yk.w * ik);
            const float4 ee = *reinterpret_cast<const float4*>(s_e + ta * K + lane * 4);
#pragma unroll
            for (int j = 0; j < NP; ++j) {
#pragma unroll
              for (int i = 0; i < RPW; ++i) {
                const float u = __shfl_sync(0xffffffffu, my_u[j], GL::a_lane(trow(i), tt));
                S[j][i] = make_float4(fmaf(u, kk.x, S[j][i].x * ee.x), fmaf(u, kk.y, S[j][i].y * ee.y),
                                      fmaf(u, kk.z, S[j][i].z * ee.z), fmaf(u, kk.w, S[j][i].w * ee.w));
              }
            }
            if (per_token) {
              const int32_t dslot = s_tslots[ta];
              if (!is_pad_id(dslot, p.null_slot)) {
#pragma unroll
                for (int j = 0; j < NP; ++j) {
                  StateT* dst = state_tile<StateT>(p.state, p.state_slot_stride, dslot, h) +
                                int64_t(rank * RC + crow[j]) * K + lane * 4;
#pragma unroll
                  for (int i = 0; i < RPW; ++i) IO::store(dst + trow(i) * K, S[j][i]);
                }
              }
            }
          }
        }
      };
      for (int t0 = 0; t0 < q; t0 += cuda_config::kTokenGroup) {
        const int rem = q - t0;
        if (rem >= 3)
          group(std::integral_constant<int, 4>{}, t0);
        else if (rem == 2)
          group(std::integral_constant<int, 2>{}, t0);
        else
          group(std::integral_constant<int, 1>{}, t0);
      }
    }
  };
  KDA_TL(tl[2]);
  {
    int s = 0;
    uint32_t phase = 0;
    bool multi = false;
    if constexpr (T::kChunksPerPass > 1) {
      // NOTES: chunks per pass. A small grid's CTA has every chunk in flight, and at one or two
      // requests each of its warps issues one dependent chain (the token groups' reductions and
      // in-group solves, the fold): several chunks per pass give a warp independent chains to
      // interleave. H = 96, one request, q = 4: record 10.64 → 10.14 µs, fused 14.07 → 13.41; q = 8
      // at two requests −10%; bf16 q = 4 −6 to −8% (two per pass). per_token, which stores the
      // state after every token, ran 4–8% slower with them and keeps one
      // (docs/data/ladder_s32/run1).
      if (cuda_config::step_chunks_per_pass(T::kChunksPerPass, SPLIT, stages,
                                            kind_is<KINDS, StepMode::kPerToken>(mode)) > 1) {
        multi = true;
#pragma unroll 1
        for (int c = 0; c < NCH; c += T::kChunksPerPass)
          pass(std::integral_constant<int, T::kChunksPerPass>{}, std::true_type{}, c, s, phase);
      }
    }
    auto chunks = [&](auto update_) {
#pragma unroll 1
      for (int c = 0; c < NCH; ++c) pass(std::integral_constant<int, 1>{}, update_, c, s, phase);
    };
    // NOTES: the dead update. A q = 1 token ends with S += u·kᵀ on its rows, but only decode and
    // per_token store the rows after the token: append (7 of a Qr = 8 cycle's 8 steps; a full row's
    // checkpoint is stored before the token), record and fused drop them; o is formed before it. So
    // the row loop is compiled twice (T::kSkipDeadUpdate), the copy chosen once per launch: fp32
    // append Qr = 8 3.8–4.5% faster at 6144–24,576 items, Qr = 16 2.7–3.2%; decode at large batch as
    // fast, H = 96, B = 8 in gate mode 2 1.8% slower, H = 24, B = 8 2.2% faster (ladder_s42/run3).
    // Skipped per chunk (a branch in delta_rows) it gained append 1.2–2.0% and cost decode at small
    // grids about 1% (docs/data/ladder_s42/run2, rung nu). An instantiation for the storing kinds
    // alone, or for the others alone, has one copy (T::kKinds).
    if (!multi) {
      if constexpr ((KINDS & cuda_config::kRecordingStepKinds) == 0) {
        chunks(std::true_type{});
      } else if constexpr ((KINDS & cuda_config::kStoringStepKinds) == 0) {
        chunks(std::false_type{});
      } else if constexpr (T::kSkipDeadUpdate) {
        if (kind_in<KINDS, cuda_config::kStoringStepKinds>(mode))
          chunks(std::true_type{});
        else
          chunks(std::false_type{});
      } else {
        chunks(std::true_type{});
      }
    }
  }

  // ---- gated RMSNorm -> bf16 out ------------------------------------------------------------
  sync_main();  // s_o complete
  if constexpr (SPLIT == 1) {
    if (gate_from_ws) drop_gate_logits(p, row_base, h, q, tid);  // (every token's logits were read in the prologue)
  }
  // NOTES: the norm exchange. Each rank stores its q partials Σo² into every rank by st.async,
  // completing on the receiver's norm_full, and waits on its own. It replaced a cluster barrier
  // after the exchange, whose arrive (release at cluster scope: MEMBAR.ALL.GPU in the SASS) made
  // each rank wait until the state rows it had just stored were acknowledged, a store round trip
  // on every Split item's chain: decode at one request 4–6% faster (H = 12…64: 4.47 → 4.25 µs at
  // H = 12, 6.09 → 5.85 at H = 48), append 1–2% (docs/data/ladder_s39/run3, rung na). Rank 0's
  // writes of the shared window columns and record rows, and its arrival on pending[row], still
  // follow every rank's reads of them: a rank's partials are computed from its conv of the old
  // window, its staged records and its fold count, so they cannot be sent before those reads
  // have returned.
  if constexpr (SPLIT > 1) {
    if (!share_gate) ptx::barrier_cluster_wait();  // every rank has started: remote writes are allowed
    for (int t = warp; t < q; t += T::kWarps) {
      float ss = 0.f;
      for (int i = lane; i < RC; i += 32) ss = fmaf(s_o[t * RC + i], s_o[t * RC + i], ss);
      ss = warp_sum(ss);
      if (lane == 0) store_all_ranks_async<SPLIT>(s_red, t * SPLIT + rank, ss, &norm_full);
    }
    mbar_wait(&norm_full, 0);
  }
  for (int i = tid; i < q * RC; i += NT) {
    const int t = i / RC, v = rank * RC + i % RC;
    if (!p.output_norm) {  // SPEC §9: out = bf16(o)
      p.out[(row_base + t) * p.out_row + h * K + v] = f32_to_bf16(s_o[i]);
      continue;
    }
    float ss = 0.f;
    if constexpr (SPLIT == 1) {
      // NOTES: a warp's 32 outputs share one token (256 threads, 128 outputs per token), so
      // each warp sums that token's squares itself: no barrier between the sums and the outputs.
#pragma unroll
      for (int jj = 0; jj < K; jj += 32) ss = fmaf(s_o[t * K + jj + lane], s_o[t * K + jj + lane], ss);
      ss = warp_sum(ss);
    } else {
#pragma unroll
      for (int rr = 0; rr < SPLIT; ++rr) ss += s_red[t * SPLIT + rr];
    }
    const float rn = inv_sqrt_(ss / float(K) + p.eps);
    const float og = L.late_out_gate()
                         ? sigmoidf_<T::kApproxRcp>(ld_bf16(p.out_gate + (row_base + t) * p.out_gate_row + h * K + v))
                         : s_og[i];
    const float w = T::kEarlyWeights ? nw : p.norm_w[v];
    p.out[(row_base + t) * p.out_row + h * K + v] = f32_to_bf16(s_o[i] * rn * w * og);
  }
  if constexpr (SPLIT > 1) {
    if (rank == 0) {
      // every rank has read the old window and its staged records (its partials have landed)
      for (int i = tid; i < 2 * K * WC; i += NT) {
        const int lc = i / WC, jj = i % WC;
        conv_store(p, r.win_out, int64_t(lc / K) * D + h * K + lc % K, jj, s_win[i]);
      }
      if (records) write_key_gate();
    }
  }
#ifdef KDA_TIMELINE
  if constexpr (SPLIT == 1) {
    sync_main();  // every output of the row written: tid 0 overwrites its first 48 bytes
    if (tid == 0) {
      KDA_TL(tl[4]);
      unsigned smid;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
      auto* dst = reinterpret_cast<unsigned long long*>(p.out + row_base * p.out_row + h * K);
      for (int i = 0; i < 5; ++i) dst[i] = tl[i];
      dst[5] = smid;
    }
  }
#endif
  // fused / append: the last of the request's H items to get here owns pending[row] (every
  // item has read it: this CTA in its resolve, the cluster's ranks before sending their partials)
  if (folds && rank == 0 && tid == 0 && arrive_last(p.arrivals, r.row, H))
    p.pending[r.row * p.pending_stride] = kind_is<KINDS, StepMode::kFused>(mode) ? 0 : pos0 + 1;
}

}  // namespace kda::cuda
