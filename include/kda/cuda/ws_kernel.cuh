// kda/cuda/ws_kernel.cuh — the WS variant: warp-specialised persistent CTAs, one per SM.
//
// One producer warp and kWsConsumers compute threads (8 warps: 16 V rows per warp). Each
// CTA owns a contiguous range of items in head-major order (item = h·B + b: consecutive
// items share head h, whose weights the consumers keep in registers). The producer walks the range ahead of
// the consumers through a ring of shared-memory stages:
//
//   producer, item j → stage s = j mod NS:
//     (every 32 items: resolve the requests of the next 32 items, one per lane — slot ids,
//     accepted, pending, beta logits, per-token slot ids in one round trip, off the
//     consumers' path) → wait empty[s] (the consumers are done with item j − NS) → plan,
//     beta logits and per-token slot ids into the stage (lane 0's plain stores, from the
//     batch's table) → arrive on full[s] with
//     the byte count → bulk copies (TMA, cp.async.bulk) of the state tile, the head's conv
//     window, the x / f_a / out-gate rows and (fused) the pending records, completing on
//     full[s].
//   consumers, item j:
//     wait full[s] → state rows into registers → the item body (StreamKernel::compute:
//     conv, norms, gate, fold, delta rule, gated RMSNorm, stores straight to global memory)
//     → every consumer thread arrives on empty[s] after its last read of the stage (no
//     CTA-wide barrier at the end of an item: see the NOTES at the end of
//     StreamKernel::compute).
//
// NOTES: why: a non-persistent CTA waits on three dependent memory round trips (index →
// state/window → compute) with only two items per SM (the state tile lives in registers);
// under full load each round trip costs microseconds. Here the loads of up to NS − 1 items
// are in flight while one computes, and the consumers never wait on an index load.
// benchmarks/ladder/state_move.cu measures the data movement alone (TMA ring ≈ 92–94 % of
// the copy ceiling, in-register tiles ≈ 95 %).
//
// Barriers: full[s] (count 1: the producer's arrive.expect_tx; the phase ends when the
// copies have landed), empty[s] (count NC: every consumer thread once it has finished
// reading the stage). Consumers synchronise on named barrier 1 (kWsConsumers
// threads), never on __syncthreads, so the producer runs free.
// Needs stream_layout() (16-byte aligned strides), like Stream; prepared.cpp falls back to
// Wide for unaligned inputs.
#pragma once

#include <cuda_runtime.h>

#include <cuda/ptx>

#include "kda/cuda/stream_kernel.cuh"

namespace kda::cuda {

// NOTES: registers. A consumer holds 16 state rows (64 registers) and its head's weights
// (~42: F_B slice, conv taps of two channels); 256 + 32 threads may use 168 each. (512
// consumers + the producer are 17 warps, 5 of them on one of the four schedulers' 16 K-register
// files: 96 registers each, 200 bytes of spills, 5–12% slower, docs/PERFORMANCE.md history;
// ptxas did not allocate past setmaxnreg.inc either.)

static_assert(sizeof(RequestPlan) <= cuda_config::WsSmem::kPlanBytes, "a stage's plan slot must hold a RequestPlan");

template <class StateT>
__global__ void __launch_bounds__(cuda_config::kWsThreads, 1) kda_ws_kernel(const __grid_constant__ StepParams p) {
  namespace ptx = ::cuda::ptx;
  constexpr int NC = cuda_config::kWsConsumers, K = kHeadDim;
  using KS = StreamKernel<StateT, NC, cuda_config::kWsConsumerBarrier>;

  // ---- shared memory: the ring, then the consumers' scratch ---------------------------------
  extern __shared__ float4 smem4[];
  __shared__ uint64_t full[cuda_config::kWsMaxStages], empty[cuda_config::kWsMaxStages];
  char* smem = reinterpret_cast<char*>(smem4);
  const cuda_config::WsSmem L{
      {p.q, p.window, p.conv_f32 ? 4 : 2, int(sizeof(StateT)), p.mode == int(StepMode::kFused) ? p.Qr : 0}};
  const int NS = p.ring_stages;
  auto stage = [&](int s) { return smem + int64_t(s) * L.stage_size(); };

  // ---- the CTA's items --------------------------------------------------------------------
  const int64_t items = int64_t(p.B) * p.H;
  const int64_t i0 = int64_t(blockIdx.x) * p.items_per_cta;
  const int64_t i1 = i0 + p.items_per_cta < items ? i0 + p.items_per_cta : items;

  // ---- barriers -----------------------------------------------------------------------------
  if (threadIdx.x == 0) {
    for (int s = 0; s < NS; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], NC);  // one arrival per consumer thread
    }
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();

  // ---- PDL wait: everything below reads the previous step's outputs ------------------------
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  if (i0 >= i1) return;

  const int tid = threadIdx.x;
  if (tid >= NC) {
    // ================================ producer warp ========================================
    // NOTES: the producer resolves the requests of 32 items at once, one item per lane, and
    // loads their beta logits and per-token slot ids in the same round trip. Resolving one
    // item at a time put two to three dependent index round trips (slot id → accepted /
    // out slot → pending) and the beta load on every item's path, about 6 µs per item under
    // full load (WS then ran at 67% of the copy ceiling), more than the bandwidth share
    // of an item (≈ 4.3 µs per SM at 4.2 TB/s). Now one resolve latency covers 32 items and
    // is hidden behind the stages already in the ring.
    const int lane = tid - NC;
    const int q = p.q, D = p.H * K, ces = p.conv_f32 ? 4 : 2;
    const bool fused = p.mode == int(StepMode::kFused);
    const bool per_token = p.mode == int(StepMode::kPerToken);
    constexpr int kBatch = cuda_config::WsSmem::kBatch;
    static_assert(kBatch == 32, "one request per producer lane");
    constexpr int kBatchRows = kBatch * kMaxQ;  // table rows: [32][16]
    float* tbeta = reinterpret_cast<float*>(smem + L.table_off(NS));
    int32_t* tslot = reinterpret_cast<int32_t*>(tbeta + kBatchRows);
    RequestPlan* tplan = reinterpret_cast<RequestPlan*>(tslot + kBatchRows);
    const bool raw_gate = p.gate_mode == int(GateMode::kPrecomputed);  // gate_in holds the raw gate [., H·128]
    for (int64_t base = i0; base < i1; base += kBatch) {
      // ---- batch: lane l resolves item base + l ---------------------------------------------
      const int64_t mine = base + lane;
      RequestPlan mr;  // kind = pad
      if (mine < i1) {
        const int b = int(mine % p.B), h = int(mine / p.B);
        // beta and per-token slot ids are readable for every b < B (pads included): loaded
        // before resolve_request so that all the loads share one round trip, then parked in
        // the table (registers would stay live across the batch) until the item's stage is free
        float bt[kMaxQ];
        int32_t ts[kMaxQ];
#pragma unroll
        for (int t = 0; t < kMaxQ; ++t) {
          if (t < q) {
            bt[t] = ld_bf16(p.beta + (int64_t(b) * q + t) * p.beta_row + h);
            ts[t] = per_token ? int32_t(p.slots[int64_t(b) * p.slots_stride0 + int64_t(t) * p.slots_stride1]) : 0;
          }
        }
        mr = resolve_request(p, b);
#pragma unroll
        for (int t = 0; t < kMaxQ; ++t) {
          if (t < q) {
            tbeta[lane * kMaxQ + t] = bt[t];
            tslot[lane * kMaxQ + t] = ts[t];
          }
        }
        tplan[lane] = mr;
      }
      __syncwarp();  // the table rows of every lane before they are read by lane t below
      const int n = i1 - base < kBatch ? int(i1 - base) : kBatch;
      for (int k = 0; k < n; ++k) {
        const int64_t it = base + k;
        const int j = int(it - i0), s = j % NS;
        if (j >= NS) mbar_wait(&empty[s], ((j / NS) & 1) ^ 1);
        const int b = int(it % p.B), h = int(it / p.B);
        const int64_t row_base = int64_t(b) * q;
        char* st = stage(s);
        char* ops = st + L.ops_off();
        // the item's plan, beta logits and slot ids into the stage, from the table.
        // NOTES: by lane 0, the thread that then arrives on full[s] (release): one writer
        // and one releasing thread, the hand-over compute-sanitizer's racecheck follows
        // (stores by other lanes ordered by __syncwarp before lane 0's release are correct
        // under the PTX memory model but were reported as races).
        if (lane == 0) {
          *reinterpret_cast<RequestPlan*>(st + L.plan_off()) = tplan[k];
          for (int t = 0; t < q; ++t) {
            reinterpret_cast<float*>(st + L.beta_off())[t] = tbeta[k * kMaxQ + t];
            if (per_token) reinterpret_cast<int32_t*>(ops + L.ops.slots_off())[t] = tslot[k * kMaxQ + t];
          }
        }
        // the fields the copies need, from lane k
        const bool run = __shfl_sync(0xffffffffu, int(mr.kind), k) == int(RequestKind::kRun);
        const int32_t state_in = __shfl_sync(0xffffffffu, mr.state_in, k);
        const int32_t win_in = __shfl_sync(0xffffffffu, mr.win_in, k);
        const int32_t row = __shfl_sync(0xffffffffu, mr.row, k);
        const int32_t pending = __shfl_sync(0xffffffffu, mr.pending, k);
        const bool recs = run && fused && pending > 0;
        const uint32_t bytes =
            run ? uint32_t(L.state_size() + int64_t(3) * K * p.window * ces +
                           int64_t(q) * (p.output_norm ? 5 : 4) * K * 2 + (recs ? int64_t(pending) * 3 * K * 4 : 0))
                : 0u;
        __syncwarp();  // the plain stores above are ordered before lane 0's release
        if (lane == 0)
          ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[s], bytes);
        __syncwarp();  // expect_tx before any complete_tx
        if (!run) continue;
        // state tile: 16 KiB pieces
        const char* src_state =
            reinterpret_cast<const char*>(state_tile<StateT>(p.state, p.state_slot_stride, state_in, h));
        const int pieces = int(L.state_size() / 16384);
        for (int c = lane; c < pieces; c += 32) bulk_g2s(st + c * 16384, src_state + c * 16384, 16384u, &full[s]);
        // the head's window, as stored (DS: one run per section; SD: one per column and section)
        const char* conv = static_cast<const char*>(p.conv);
        char* win = ops + L.ops.win_off();
        if (p.conv_dim_first) {
          for (int c = lane; c < 3; c += 32)
            bulk_g2s(win + int64_t(c) * K * p.window * ces,
                     conv + conv_offset(p, win_in, int64_t(c) * D + h * K, 0) * ces, uint32_t(K * p.window * ces),
                     &full[s]);
        } else {
          for (int c = lane; c < 3 * p.window; c += 32) {
            const int col = c / 3, sec = c % 3;
            bulk_g2s(win + (int64_t(col) * 3 * K + sec * K) * ces,
                     conv + conv_offset(p, win_in, int64_t(sec) * D + h * K, col) * ces, uint32_t(K * ces), &full[s]);
          }
        }
        // per token: x rows of the q | k | v sections, f_a (or the raw gate), out gate
        const int64_t fcol = raw_gate ? int64_t(h) * K : 0;
        const int per_token_copies = p.output_norm ? 5 : 4;  // without the output norm: no out gate
        for (int c = lane; c < per_token_copies * q; c += 32) {
          const int t = c / per_token_copies, kk = c % per_token_copies;
          const int64_t rw = row_base + t;
          if (kk < 3)
            bulk_g2s(ops + L.ops.x_off() + (int64_t(t) * 3 * K + kk * K) * 2,
                     p.qkv + rw * p.qkv_row + int64_t(kk) * D + h * K, uint32_t(K * 2), &full[s]);
          else if (kk == 3)
            bulk_g2s(ops + L.ops.fa_off() + int64_t(t) * K * 2, p.gate_in + rw * p.gate_in_row + fcol, uint32_t(K * 2),
                     &full[s]);
          else
            bulk_g2s(ops + L.ops.og_off() + int64_t(t) * K * 2, p.out_gate + rw * p.out_gate_row + int64_t(h) * K,
                     uint32_t(K * 2), &full[s]);
        }
        // fused: the pending records (u rows, then k|g rows)
        if (recs) {
          if (lane == 0)
            bulk_g2s(ops + L.ops.rec_off(), p.correction + int64_t(row) * p.correction_row + int64_t(h) * p.Qr * K,
                     uint32_t(pending * K * 4), &full[s]);
          if (lane == 1)
            bulk_g2s(ops + L.ops.rec_off() + L.ops.rec_cap() * K * 4,
                     p.key_gate + int64_t(row) * p.key_gate_row + int64_t(h) * p.Qr * 2 * K,
                     uint32_t(pending * 2 * K * 4), &full[s]);
        }
      }
    }
    return;
  }

  // ================================== consumers ===============================================
  KS ks{p, L.ops, smem, reinterpret_cast<float*>(smem + int64_t(NS) * L.stage_size()), tid, tid & 31, tid >> 5};
  float4 S[KS::RPW];
  typename KS::HeadWeights hw;  // this thread's weights of the current head, in registers
  for (int64_t it = i0; it < i1; ++it) {
    const int j = int(it - i0), s = j % NS;
    // the head's weights, once per head: items are head-major (item = h·B + b)
    if (j == 0 || it % p.B == 0) ks.load_weights(hw, int(it / p.B));
    mbar_wait(&full[s], (j / NS) & 1);
    const char* st = stage(s);
    const RequestPlan r = *reinterpret_cast<const RequestPlan*>(st + L.plan_off());
    if (r.kind == RequestKind::kRun) ks.load_state(S, st);
    const float beta_raw = tid < p.q ? reinterpret_cast<const float*>(st + L.beta_off())[tid] : 0.f;
    ks.compute(it, r, st + L.ops_off(), S, beta_raw, hw);
    // this thread is done with stage s (its last reads: the out gate in the output loop).
    // NOTES: every consumer thread arrives after its own reads (no cross-lane step that
    // compute-sanitizer's racecheck does not follow; see docs/VALIDATION.md §4).
    ptx::mbarrier_arrive(&empty[s]);
  }
}

}  // namespace kda::cuda
