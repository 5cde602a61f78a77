// kda/cuda/config.h — launch configuration of the CUDA step kernels that the host planner
// needs (threads, shared memory), kept free of CUDA so that plan_step is testable on the CPU.
#pragma once

#include <cstdint>

#include "kda/types.h"

namespace kda::cuda_config {

/// Split / Wide kernel (one body; SPLIT CTAs per item as a thread-block cluster, SPLIT = 1
/// is Wide). Every CTA has 256 threads (8 warps) and owns RC = 128 / SPLIT V rows of its
/// item; the rows arrive in chunks of CR = min(32, RC) rows (one bulk copy each) into a ring
/// of `stages` shared-memory stages, so the CTA holds no state in registers beyond the rows
/// a warp is working on and several CTAs fit on an SM.
inline constexpr int kStepThreads = 256;
inline constexpr int kStepMaxStages = 4;
/// Verify kernels (q ≥ 2; a kernel's q is its Q: 0 for run-time q, or the step's q) have a form
/// compiled for at most kSmallGridVerifyCtasPerSm CTAs per SM: 128 registers a thread instead of
/// 64, the sigmoid's reciprocal by `rcp.approx` (StepTraits::kSmallGridVerify). Split runs only
/// small grids (the planner's pick up to 12 items) and has only that form at q ≥ 2, laid out for
/// it; Wide has both, and runs that form where its plan lays out at most that many CTAs per SM (a
/// grid of at most two CTAs per SM, or shared memory for at most two).
inline constexpr int kSmallGridVerifyCtasPerSm = 2;
inline constexpr bool is_split_verify(int split, int q) { return split > 1 && q != 1; }
/// Wide verify kernels at q = 2, 3, 4 without the F_B path (gate modes 1 and 2) also have a dense
/// form, compiled for kDenseVerifyCtasPerSm CTAs per SM (48 registers a thread instead of 64; one
/// state stage then fits beside four other CTAs): the planner lays a record or fused grid out for
/// it where five CTAs per SM beat four (heuristics::wide_verify_ctas_per_sm), the dispatch runs it
/// where a plan says five.
inline constexpr int kDenseVerifyCtasPerSm = 5;
inline constexpr bool has_dense_verify_form(int split, int q, bool gate_from_fb) {
  return split == 1 && q >= 2 && q <= 4 && !gate_from_fb;
}
/// Whether a step of `q` tokens on SPLIT = `split` laid out for `ctas_per_sm` runs the
/// small-grid verify form (the planner's and the dispatch's one rule).
inline constexpr bool small_grid_verify(int split, int q, int ctas_per_sm) {
  return q != 1 && (split > 1 || ctas_per_sm <= kSmallGridVerifyCtasPerSm);
}
/// The CTAs per SM a Split/Wide instantiation <SPLIT, Q, MIN_BLOCKS> is compiled for (its
/// __launch_bounds__ minimum; StepTraits::kMinBlocks): the small-grid verify form two (Split at
/// q ≥ 2, Wide instantiated with MIN_BLOCKS = 2 at q ≥ 2), else MIN_BLOCKS.
inline constexpr int step_kernel_ctas_per_sm(int split, int q, int min_blocks) {
  return small_grid_verify(split, q, min_blocks) ? kSmallGridVerifyCtasPerSm : min_blocks;
}
inline constexpr int rows_per_cta(int split) { return kHeadDim / split; }
/// The narrow form: the Wide q = 1 kernel of the storing kinds (decode, per_token) with bf16 state in gate modes 1
/// and 2 runs CTAs of kNarrowThreads threads, compiled for kNarrowCtasPerSm of them per SM (64 registers a thread),
/// each thread on the q, k and v channel and the gate row of its index, its four warps on the rows of kNarrowChunkRows-row
/// chunks (step_kernel.cuh, NOTES: the narrow form; the planner's rule and the chunks' measurements:
/// heuristics::narrow_step).
/// KDA_STEP_NARROW_CTAS_PER_SM: the ladder's knob (0: no narrow form; not the six of the 256-thread form, whose
/// instantiation it would then be).
#ifndef KDA_STEP_NARROW_CTAS_PER_SM
#define KDA_STEP_NARROW_CTAS_PER_SM 8
#endif
inline constexpr int kNarrowThreads = 128;
inline constexpr int kNarrowCtasPerSm = KDA_STEP_NARROW_CTAS_PER_SM;
/// Whether a Split/Wide step of this shape has a narrow form (`storing`: its kind stores the rows after the token).
inline constexpr bool narrow_form(int split, int q, int state_bytes, bool storing) {
  return kNarrowCtasPerSm > 0 && split == 1 && q == 1 && state_bytes == 2 && storing;
}
/// Split 2 with bf16 state at q = 1 takes its 64 rows as one chunk (16 KiB, the bytes of an fp32
/// chunk; eight rows a warp) in kernels compiled for two CTAs per SM (90 / 94 registers where four
/// allow 64; split_q1_min_blocks). Its plans lay out one CTA per SM (up to 66 items), so the
/// registers cost no occupancy. Decode at one request 3.2–6.0% faster, append Qr = 8 8.1–8.7%
/// (H = 32, 48, 64; docs/data/ladder_s46/run1, rung nc2b). fp32 lost with either half: one 64-row
/// chunk spilled at 64 registers, and at two CTAs per SM it was 1–4% slower (ladder_s43/run4).
inline constexpr bool split2_bf16_q1_one_chunk(int split, int q, int state_bytes) {
  return split == 2 && q == 1 && state_bytes == 2;
}
/// The narrow form's chunk rows (four warps: a quarter of them a warp): 16, three in flight (heuristics::narrow_step,
/// heuristics::kNarrowStages). KDA_STEP_NARROW_CHUNK_ROWS: the ladder's knob (32: eight rows a warp).
#ifndef KDA_STEP_NARROW_CHUNK_ROWS
#define KDA_STEP_NARROW_CHUNK_ROWS 16
#endif
inline constexpr int kNarrowChunkRows = KDA_STEP_NARROW_CHUNK_ROWS;
static_assert(kNarrowChunkRows == 16 || kNarrowChunkRows == 32, "the narrow form's chunks: 16 or 32 rows");
/// The rows of a state chunk (a stage) and the chunks of a CTA of a Split/Wide step with `q` tokens
/// (0: q at run time) and `state_bytes` per state element on CTAs of `threads`: 32 rows, or the CTA's rows where fewer
/// (Split 8: 16), or split2_bf16_q1_one_chunk's 64, or the narrow form's kNarrowChunkRows.
inline constexpr int chunk_rows(int split, int q, int state_bytes, int threads = kStepThreads) {
  if (threads == kNarrowThreads) return kNarrowChunkRows;
  if (split2_bf16_q1_one_chunk(split, q, state_bytes)) return 64;
  return rows_per_cta(split) < 32 ? rows_per_cta(split) : 32;
}
inline constexpr int chunks_per_cta(int split, int q, int state_bytes, int threads = kStepThreads) {
  return rows_per_cta(split) / chunk_rows(split, q, state_bytes, threads);
}
/// The CTAs per SM a Split q = 1 instantiation is compiled for (MIN_BLOCKS; Wide's q = 1 forms are
/// heuristics' kStepCtasPerSm, kStepBf16Q1CtasPerSm, kStepF32AppendCtasPerSm).
inline constexpr int split_q1_min_blocks(int split, int state_bytes) {
  return split2_bf16_q1_one_chunk(split, 1, state_bytes) ? 2 : 4;
}
/// The step kinds a Split/Wide instantiation runs, a bit per StepMode (StepTraits' KINDS): every
/// kind, or a subset, whose kernel then compiles the other kinds' code out (step_kernel.cuh, NOTES:
/// the kinds at compile time). The dispatch never launches an instantiation for a kind outside its
/// set (launch_step refuses it).
inline constexpr unsigned step_kind(StepMode m) { return 1u << unsigned(m); }
inline constexpr unsigned kAllStepKinds = step_kind(StepMode::kDecode) | step_kind(StepMode::kPerToken) |
                                          step_kind(StepMode::kRecord) | step_kind(StepMode::kFused) |
                                          step_kind(StepMode::kAppend);
/// The kinds that store the state rows after their tokens (decode, per_token); the others (append,
/// record, fused) write records instead, so a q = 1 token's update S += u·kᵀ is dead there.
inline constexpr unsigned kStoringStepKinds = step_kind(StepMode::kDecode) | step_kind(StepMode::kPerToken);
inline constexpr unsigned kRecordingStepKinds = kAllStepKinds & ~kStoringStepKinds;
inline constexpr bool stores_updated_rows(StepMode m) { return (kStoringStepKinds & step_kind(m)) != 0; }
/// Chunks a warp takes per pass of the chunk loop (step_kernel.cuh, NOTES: chunks per pass) in
/// the Split/Wide instantiation <SPLIT, Q, MIN_BLOCKS> with `state_bytes` of state per element:
/// Wide's small-grid verify form takes all four with q known at compile time and fp32 state,
/// two with q at run time or bf16 state; every other kernel one. Measured: H = 96, one and two
/// requests, q = 2…16 (fp32: two and four; bf16: two), docs/data/ladder_s32/run1.
/// KDA_STEP_CHUNKS_PER_PASS: the ladder's knob (0: this rule; else the small-grid form's count).
#ifndef KDA_STEP_CHUNKS_PER_PASS
#define KDA_STEP_CHUNKS_PER_PASS 0
#endif
inline constexpr int chunks_per_pass(int split, int q, int min_blocks, int state_bytes) {
  if (split != 1 || !small_grid_verify(split, q, min_blocks)) return 1;
  if (KDA_STEP_CHUNKS_PER_PASS > 0) return KDA_STEP_CHUNKS_PER_PASS;
  return q != 0 && state_bytes == 4 ? 4 : 2;
}
/// The chunks per pass a step runs with on a kernel compiled for `compiled`: those where every
/// chunk is in flight (`stages` = the CTA's chunks: no refills) and the step is not per_token
/// (which stores the state after each token: 4–8% slower with more), else one.
inline constexpr int step_chunks_per_pass(int compiled, int split, int stages, bool per_token) {
  // (compiled > 1: Wide, whose chunks do not depend on q or the state dtype)
  return compiled > 1 && stages == chunks_per_cta(split, 0, 4) && !per_token ? compiled : 1;
}
/// Fold warps (step_kernel.cuh, NOTES: fold warps): Wide's small-grid verify form has twins,
/// instantiated with MIN_BLOCKS = kFoldWarpsMinBlocks, launched with this many more warps, which
/// fold a fused step's pending records into each state chunk as it lands and write the checkpoint
/// while the other warps run the q tokens' prologue. A twin runs only where its CTA has the SM to
/// itself: a fused step with every chunk in flight on a plan of one CTA per SM (launches_fold_twins).
/// KDA_STEP_FOLD_WARPS: the ladder's knob (0: the twins run without them).
#ifndef KDA_STEP_FOLD_WARPS
#define KDA_STEP_FOLD_WARPS 4
#endif
inline constexpr int kFoldWarpsMinBlocks = 1;
inline constexpr int fold_warps(int split, int q, int min_blocks) {
  return split == 1 && q != 1 && min_blocks == kFoldWarpsMinBlocks ? KDA_STEP_FOLD_WARPS : 0;
}
/// Whether a step launches the fold-warp twins: a fused step with every chunk in flight (`stages`
/// = the CTA's chunks: no refills) on a Wide plan of one CTA per SM whose gate needs no F_B in the
/// step (gate modes 1 and 2: the twins have no F_B path). The dispatch's and the tests' one rule.
inline constexpr bool launches_fold_twins(int split, int stages, bool fused, int ctas_per_sm, bool gate_from_fb) {
  return split == 1 && fused && stages == chunks_per_cta(1, 0, 4) && ctas_per_sm == 1 && !gate_from_fb;
}
/// The twins run fused steps only, so they are compiled for that kind alone (step_kind).
inline constexpr unsigned kFoldTwinStepKinds = step_kind(StepMode::kFused);
/// The dense verify form runs the record and fused steps its plans name (heuristics::
/// wide_verify_ctas_per_sm), so it is compiled for those two kinds alone.
inline constexpr unsigned kDenseVerifyStepKinds = step_kind(StepMode::kRecord) | step_kind(StepMode::kFused);
inline constexpr int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }
/// Tokens of a q ≥ 2 step are taken in groups of up to kTokenGroup: the dot products of a
/// group's tokens with the state as it was when the group began are independent, so they
/// share one reduction (step_kernel.cuh, NOTES: token groups).
inline constexpr int kTokenGroup = 4;

/// Gate mode 1 kernel (gate_kernel.cuh): a tile of 16, 32 or up to kGateRowsPerCta rows
/// (requests × tokens; heuristics::gate_tile_rows) against one head's 128 gate rows per CTA,
/// each warp on 32 of the head's gate rows for every 16-row strip of the tile; both operands
/// staged with rows padded to kGateLd elements (16-byte pieces, no shared-memory bank conflicts).
inline constexpr int kGateThreads = 128;
inline constexpr int kGateRowsPerCta = 64;
inline constexpr int kGateLd = kRank + 8;
inline constexpr int64_t gate_smem(int tile_rows = kGateRowsPerCta) {
  return int64_t(kHeadDim + tile_rows) * kGateLd * 2;
}
/// Rows of the fp32 gate workspace for `rows` step rows: whole tiles.
inline constexpr int64_t gate_ws_rows(int64_t rows) {
  return (rows + kGateRowsPerCta - 1) / kGateRowsPerCta * kGateRowsPerCta;
}

/// Shared-memory plan of the Split/Wide kernel, byte offsets (16-byte aligned). The scratch
/// comes first so that its offsets are compile-time constants when q is (the decode kernel):
///   fa      [q][128] f32        gate inputs (modes 0, 1)
///   yq, yk, g, e [q][128] f32   conv outputs of the q / k channels (unnormalised: the norms are
///                               applied where the vectors are used),
///                               activated gates, decays e = exp(g)
///   yv, o, og [q][RC] f32       conv outputs of the own v rows, pre-norm outputs, sigmoid(out gate)
///                               (og: q = 1 only, late_out_gate)
///   win     [256][W-2+q] f32    new q/k window columns, written by rank 0 at the end (SPLIT > 1)
///   part    [4][3] f32          q = 1: per-warp Σy_q², Σy_k², Σy_q·y_k (warps 0–3 hold the q/k channels)
///   beta[16], red[16][SPLIT] (Σo² partials of the ranks), tslots[16]
///   q ≥ 2 only (token groups, step_kernel.cuh):
///   kgq     [2][qg][128] f32    Γ⊙k then Γ⊙q per token (Γ: the decays since the token's
///                               group began; qg = q rounded up to whole groups, pad rows 0)
///   mn      [q][8] f32          in-group coefficients M[t][j], then N[t][j] (j < 4)
///   nrm     [2][16] f32         1/|y_k|, then 1/|y_q|·scale per token
///   state   [stages][CR][128] as stored (fp32 or bf16), filled by bulk copies
///   rec_u   [records][RC] f32   u of the pending records, own rows (fused / append)
///   rec_kg  [records][256] f32  k then g of the pending records (g replaced by e = exp(g))
struct StepSmem {
  int q = 1, split = 1, stages = 1, state_bytes = 4;
  int records = 0;             ///< records staged per item (fused / append: Qr), else 0
  int window_cols = 0;         ///< W - 2 + q (the staged window columns of SPLIT > 1)
  int threads = kStepThreads;  ///< threads per CTA (kNarrowThreads: the narrow form's chunks)
  constexpr int rc() const { return rows_per_cta(split); }
  constexpr int cr() const { return chunk_rows(split, q, state_bytes, threads); }
  constexpr int64_t stage_bytes() const { return int64_t(cr()) * kHeadDim * state_bytes; }
  constexpr int64_t fa() const { return 0; }
  constexpr int64_t yq() const { return fa() + int64_t(q) * kHeadDim * 4; }
  constexpr int64_t yk() const { return yq() + int64_t(q) * kHeadDim * 4; }
  constexpr int64_t g() const { return yk() + int64_t(q) * kHeadDim * 4; }
  constexpr int64_t e() const { return g() + int64_t(q) * kHeadDim * 4; }
  constexpr int64_t yv() const { return e() + int64_t(q) * kHeadDim * 4; }
  constexpr int64_t o() const { return yv() + align16(int64_t(q) * rc() * 4); }
  constexpr int64_t og() const { return o() + align16(int64_t(q) * rc() * 4); }
  /// q ≥ 2 stages no sigmoid(out gate) rows: the epilogue reads the gate beside norm_w, so
  /// q·RC·4 bytes fewer (record q = 8: 57.0 → 53.0 KiB, three → four CTAs per SM; 11% faster
  /// there; record q = 2 / 4 and per_token from 64 requests 1–5% faster; fused and record q = 16
  /// within −2…+1.3%; per_token q = 8 at six requests, a WS point, +3.5%:
  /// docs/data/ladder_s17/run1).
  /// q = 1 keeps them: its offsets are constants and the decode step fits four CTAs anyway.
  constexpr bool late_out_gate() const { return q > 1; }
  constexpr int64_t win() const { return og() + align16(int64_t(late_out_gate() ? 0 : q) * rc() * 4); }
  constexpr int64_t part() const { return win() + (split > 1 ? align16(int64_t(2) * kHeadDim * window_cols * 4) : 0); }
  constexpr int64_t beta() const { return part() + (q == 1 ? align16(12 * 4) : 0); }
  constexpr int64_t red() const { return beta() + kMaxQ * 4; }
  constexpr int64_t tslots() const { return red() + align16(int64_t(kMaxQ) * split * 4); }
  constexpr int qg() const { return (q + kTokenGroup - 1) / kTokenGroup * kTokenGroup; }
  constexpr int64_t kgq() const { return tslots() + kMaxQ * 4; }
  constexpr int64_t mn() const { return kgq() + (q > 1 ? int64_t(2) * qg() * kHeadDim * 4 : 0); }
  constexpr int64_t nrm() const { return mn() + (q > 1 ? int64_t(q) * 8 * 4 : 0); }
  constexpr int64_t state() const { return (nrm() + (q > 1 ? 2 * kMaxQ * 4 : 0) + 127) / 128 * 128; }
  constexpr int64_t rec_u() const { return state() + stages * stage_bytes(); }
  constexpr int64_t rec_kg() const { return rec_u() + align16(int64_t(records) * rc() * 4); }
  constexpr int64_t bytes() const { return rec_kg() + int64_t(records) * 2 * kHeadDim * 4; }
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
  int q, window, conv_bytes, state_bytes;
  int records;  ///< records a stage holds: fused, the row's Qr (pending may be any count ≤ Qr); else 0
  constexpr int64_t state_size() const { return int64_t(kHeadDim) * kHeadDim * state_bytes; }
  constexpr int64_t win_off() const { return 0; }
  constexpr int64_t x_off() const { return round16(int64_t(3) * kHeadDim * window * conv_bytes); }
  constexpr int64_t fa_off() const { return x_off() + int64_t(q) * 3 * kHeadDim * 2; }
  constexpr int64_t og_off() const { return fa_off() + int64_t(q) * kHeadDim * 2; }
  constexpr int64_t slots_off() const { return og_off() + int64_t(q) * kHeadDim * 2; }
  constexpr int64_t rec_off() const { return slots_off() + kMaxQ * 4; }
  /// fused: records staged per item. pending is any count up to Qr (SPEC §4: `accepted` after a
  /// verify, 1 … Qr after append steps), so it may exceed both q and window − 2.
  constexpr int64_t rec_cap() const { return records; }
  constexpr int64_t stage_size() const { return rec_off() + rec_cap() * 3 * kHeadDim * 4; }
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
/// The consumers' named barrier (bar.sync id; 0 is __syncthreads'): the item body synchronises
/// the kWsConsumers compute threads on it, without the producer warp.
inline constexpr int kWsConsumerBarrier = 1;
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
