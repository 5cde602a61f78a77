// The small shape matrix that compute-sanitizer runs on the GPU (memcheck, racecheck, synccheck,
// initcheck; scripts/gpu_run.sh): every CUDA variant ('split', 'wide', 'ws') × every step
// kind (decode, decode with out_slots, append, per_token, record, fused with pending 0 / =
// accepted / > q, commit, flush) × up to ten small shapes, with pads (-1 and the null slot), a
// caller error, strided slot tensors, padded slot strides, packed rows and separate views, gate
// modes 1 (Split / Wide: the gate kernel too) and 2, the fold-warp twins (fused on Wide at one
// CTA per SM), the dense verify form (record and fused on Wide at five CTAs per SM), the q = 1
// kernels cut for six CTAs per SM (bf16 decode and append, fp32 append), the narrow form (bf16 decode and
// per_token beyond one wave of six CTAs per SM), Split 2's bf16 q = 1 kernels (one 64-row chunk), and B = 0 — each result checked against the float64 reference (check.h
// check_step). Every byte a kernel may read is initialised (initcheck), so a report is a kernel
// bug.
//
//   compute-sanitizer --tool memcheck build/gpu/tests/cpp/kda_tests --gtest_filter='SanitizerMatrix.*'
//
// Without a GPU the same code runs the CPU backend on host copies (a self-check of this test).
#include <gtest/gtest.h>

#if defined(KDA_WITH_CUDA)
#include <cuda_runtime.h>
#endif

#include <iostream>
#include <memory>

#include "api.h"
#include "check.h"
#include "data.h"
#include "kda/cuda/config.h"
#include "kda/heuristics.h"
#include "plan/counters.h"

namespace kt {
namespace {

using kda::Variant;
using kref::Mode;

bool have_gpu() {
#if defined(KDA_WITH_CUDA)
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return false;
#endif
}

/// The GPU's SM count (0 without one): which layouts the 544-item shapes reach depends on it.
int gpu_sms() {
  int sms = 0;
#if defined(KDA_WITH_CUDA)
  if (have_gpu() && cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) sms = 0;
#endif
  return sms;
}

/// One allocation on the device under test (the GPU, or host memory in the self-check).
struct DevMem {
  bool gpu = false;
  void* p = nullptr;
  std::size_t n = 0;
  std::vector<unsigned char> host;
  DevMem(bool g, const void* src, std::size_t bytes) : gpu(g), n(std::max<std::size_t>(bytes, 16)) {
#if defined(KDA_WITH_CUDA)
    if (gpu) {
      EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess);
      // initialise all of it (initcheck), then the data
      EXPECT_EQ(cudaMemset(p, 0, n), cudaSuccess);
      if (bytes) {
        EXPECT_EQ(cudaMemcpy(p, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
      }
      return;
    }
#endif
    host.assign(n, 0);
    if (bytes) std::memcpy(host.data(), src, bytes);
    p = host.data();
  }
  ~DevMem() {
#if defined(KDA_WITH_CUDA)
    if (gpu && p) cudaFree(p);
#endif
  }
  void down(void* dst, std::size_t bytes) const {
    if (!bytes) return;
#if defined(KDA_WITH_CUDA)
    if (gpu) {
      EXPECT_EQ(cudaMemcpy(dst, p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      return;
    }
#endif
    std::memcpy(dst, p, bytes);
  }
};

struct Device {
  bool gpu;
  std::vector<std::unique_ptr<DevMem>> keep;
  /// `hv` (a view of host memory inside [base, base + bytes)) moved to the device.
  TensorView put(const TensorView& hv, const void* base, std::size_t bytes) {
    if (!hv.defined()) return hv;
    keep.push_back(std::make_unique<DevMem>(gpu, base, bytes));
    TensorView v = hv;
    v.data = static_cast<char*>(keep.back()->p) + (static_cast<const char*>(hv.data) - static_cast<const char*>(base));
    v.device = gpu ? kda::Device::kCUDA : kda::Device::kCPU;
    v.device_id = 0;
    return v;
  }
  template <class T>
  TensorView put_vec(const TensorView& hv, const std::vector<T>& v) {
    return put(hv, v.data(), v.size() * sizeof(T));
  }
  TensorView put_index(const Index& ix) { return put_vec(ix.view, ix.mem); }
};

enum class Kind { kDecode, kDecodeOut, kPerToken, kRecord, kFused, kCommit, kFlush, kAppend };
const char* kind_name(Kind k) {
  const char* n[] = {"decode", "decode+out_slots", "per_token", "record", "fused", "commit", "flush", "append"};
  return n[int(k)];
}

struct MCase {
  Kind kind;
  int H, B, q;
  bool ds, conv_f32, state_bf16, lb, bias, gate2, views;
  bool gate1;  // gate mode 1 forced (the gate kernel, then the step; Split / Wide)
  int layout;  // index tensors (make_index_2d / make_index_1d)
  int null_slot;
  bool error;  // one request with a caller error (ACCEPTED)
  Variant variant;
  bool narrow;  // the policy asks for the narrow form (Policy::narrow 'on')
  int qr;       // records per row (0: window - 2)
  std::string name() const {
    std::ostringstream os;
    os << kind_name(kind) << " H" << H << " B" << B << " q" << q << (ds ? " DS" : " SD") << (conv_f32 ? " conv32" : "")
       << (state_bf16 ? " state16" : "") << (lb ? " lb" : "") << (gate2 ? " gate2" : "") << (gate1 ? " gate1" : "") << (views ? " views" : "")
       << " layout" << layout << " null" << null_slot << (error ? " error" : "") << (qr ? " Qr" + std::to_string(qr) : "")
       << " " << kda::variant_name(variant);
    return os.str();
  }
};

/// Runs one case on the device under test and checks it against the reference.
void run_mcase(const MCase& c, bool gpu, uint64_t seed) {
  SCOPED_TRACE(c.name() + ", seed " + std::to_string(seed));
  Rng rng(seed);
  LayerOpts lo;
  lo.H = c.H;
  lo.lower_bound = c.lb;
  lo.bias = c.bias;
  LayerData L = random_layer(rng, lo);
  const int H = c.H, B = c.B, q = c.q, D = H * K;
  const bool per_token = c.kind == Kind::kPerToken;
  const bool records = c.kind == Kind::kRecord || c.kind == Kind::kFused || c.kind == Kind::kCommit || c.kind == Kind::kFlush ||
                       c.kind == Kind::kAppend;
  const int cols = per_token ? q + 1 : 1;  // row width > q
  // accepted up to q + 2 (fused: pending > q); q = 16 keeps window = 2 + q so that Stream's
  // shared memory (state + two stages with max(q, window - 2) records) fits the device
  const int window = 2 + q + (q >= 16 ? 0 : 2);
  PoolSpec ps;
  ps.H = H;
  ps.window = window;
  ps.nslots = int64_t(B) * (cols + 1) + 4;
  ps.ds = c.ds;
  ps.conv_f32 = c.conv_f32;
  ps.state_bf16 = c.state_bf16;
  ps.conv_slot_extra = 8;   // padded, still 16-byte aligned (Stream)
  ps.state_slot_extra = 8;
  if (records) {
    ps.rows_r = ps.nslots;
    ps.Qr = c.qr ? c.qr : window - 2;
    ps.rec_row_extra = 4;
    ps.with_pending = true;
  }
  PoolData pool = make_pool(ps);
  pool.randomize(rng);

  // ---- the step ---------------------------------------------------------------------------
  std::vector<int64_t> live = live_slots(rng, ps.nslots, c.null_slot);
  size_t next = 0;
  kref::Step st;
  st.mode = c.kind == Kind::kDecode || c.kind == Kind::kDecodeOut ? Mode::kDecode
            : per_token                                           ? Mode::kPerToken
            : c.kind == Kind::kFused                              ? Mode::kFused
            : c.kind == Kind::kAppend                             ? Mode::kAppend
                                                                  : Mode::kRecord;
  st.q = q;
  st.null_slot = c.null_slot;
  st.precomputed_gate = c.gate2;
  st.slots.assign(B, std::vector<int64_t>(cols));
  for (auto& r : st.slots)
    for (auto& x : r) x = live[next++];
  st.accepted.resize(B);
  for (int b = 0; b < B; ++b) st.accepted[b] = rng.integer(1, per_token ? std::min(cols, window - 2) : window - 2);
  if (c.kind == Kind::kDecodeOut)
    for (int b = 0; b < B; ++b) st.out_slots.push_back(live[next++]);
  if (B >= 2) st.slots[1][0] = (c.null_slot >= 0 && seed % 2) ? c.null_slot : -1;  // a pad request
  if (per_token && B >= 1 && q >= 2 && st.accepted[0] != 2) st.slots[0][1] = -1;    // a pad token (t = 1)
  if (c.error && B >= 3) st.accepted[2] = window;                                  // ACCEPTED
  std::vector<int64_t> rows(B);
  for (int b = 0; b < B; ++b) rows[b] = live[next++];
  if (records && c.kind != Kind::kCommit) st.record_rows = rows;
  std::vector<int64_t> counts;
  if (c.kind == Kind::kFused)
    for (int b = 0; b < B; ++b)  // pending 0 or = accepted (which may exceed q); 0 for the bad request
      pool.pending[size_t(rows[b])] = (b % 2 || (c.error && b == 2)) ? 0 : int32_t(st.accepted[b]);
  if (c.kind == Kind::kFlush || c.kind == Kind::kAppend)  // append: any count, Qr (a full row) too
    for (int b = 0; b < B; ++b) pool.pending[size_t(rows[b])] = (c.kind == Kind::kAppend && b == 0) ? ps.Qr : int32_t(rng.integer(0, ps.Qr));
  if (c.kind == Kind::kCommit)
    for (int b = 0; b < B; ++b) counts.push_back(rng.integer(0, ps.Qr));

  // ---- the device side ----------------------------------------------------------------------
  Device dev{gpu, {}};
  LayerWeights hw = L.weights();
  LayerWeights dw = hw;
  dw.conv_weight = dev.put_vec(hw.conv_weight, L.conv_w);
  if (hw.conv_bias.defined()) dw.conv_bias = dev.put_vec(hw.conv_bias, L.conv_b);
  dw.f_b_weight = dev.put_vec(hw.f_b_weight, L.f_b);
  dw.A_log = dev.put_vec(hw.A_log, L.A_log);
  dw.dt_bias = dev.put_vec(hw.dt_bias, L.dt_bias);
  dw.norm_weight = dev.put_vec(hw.norm_weight, L.norm_w);
  Policy pol;
  pol.variant = gpu ? c.variant : Variant::kAuto;
  pol.gate_mode = c.gate2 ? kda::GateMode::kPrecomputed : c.gate1 ? kda::GateMode::kShared : kda::GateMode::kAuto;
  if (gpu && c.narrow) pol.narrow = kda::NarrowForm::kOn;
  std::unordered_map<StepKey, Policy, kda::StepKeyHash> pols;
  if (c.kind != Kind::kCommit && c.kind != Kind::kFlush) pols[StepKey{to_mode(st.mode), B, q}] = pol;
  PreparedKda kda(dw, pols, c.ds, c.null_slot, pol);
  Caches hc = pool.caches();
  Caches dc;
  dc.conv_state = dev.put_vec(hc.conv_state, pool.conv);
  dc.state = dev.put_vec(hc.state, pool.state);
  if (records) {
    dc.correction = dev.put_vec(hc.correction, pool.corr);
    dc.key_gate = dev.put_vec(hc.key_gate, pool.kg);
    dc.pending = dev.put_vec(hc.pending, pool.pending);
  }
  kda.prepare(dc);

  InputOpts io;
  io.gate2 = c.gate2;
  io.pitch_extra = (8 - (H % 8)) % 8 + 8;  // 16-byte aligned rows (Stream), padding columns
  io.view_extra = 3;
  InputData in = random_inputs(rng, B * q, H, io);
  OutBuf out = make_out(B * q, D, 8);
  const PoolData before = pool;
  const int strided = c.layout;
  Index slots = per_token ? make_index_2d(st.slots, strided) : make_index_1d(first_column(st.slots), strided);
  if (per_token && B == 0) {  // make_index_2d cannot tell the row width of an empty table
    slots.mem.assign(8, 977);
    slots.view = make_view(slots.mem.data(), DType::kI32, {0, cols}, {cols + 5, 1});
  }
  Index acc = make_index_1d(st.accepted, strided), outs, rr, cn;
  TensorView d_out = dev.put_vec(out.view(), out.mem);
  // every buffer the operation may have written, back into the host pool / out
  auto down = [&](const TensorView& dv, void* host, std::size_t bytes) {
    for (auto& m : dev.keep)
      if (static_cast<char*>(dv.data) >= static_cast<char*>(m->p) &&
          static_cast<char*>(dv.data) < static_cast<char*>(m->p) + m->n) {
        m->down(host, bytes);
        return;
      }
    ADD_FAILURE() << "no device allocation for a view";
  };
  auto download_all = [&]() {
    down(dc.conv_state, pool.conv.data(), pool.conv.size());
    down(dc.state, pool.state.data(), pool.state.size());
    if (records) {
      down(dc.correction, pool.corr.data(), pool.corr.size() * 4);
      down(dc.key_gate, pool.kg.data(), pool.kg.size() * 4);
      down(dc.pending, pool.pending.data(), pool.pending.size() * 4);
    }
    down(d_out, out.mem.data(), out.mem.size() * 2);
  };

  if (c.kind == Kind::kCommit || c.kind == Kind::kFlush) {
    TensorView drows;
    if (c.kind == Kind::kFlush || seed % 2) {
      rr = make_index_1d(rows, strided);
      drows = dev.put_index(rr);
    }
    const std::vector<int64_t> cs = first_column(st.slots);
    if (c.kind == Kind::kCommit) {
      cn = make_index_1d(counts, strided);
      kda.commit(dc, dev.put_index(slots), drows, dev.put_index(cn));
    } else {
      kda.flush(dc, dev.put_index(slots), drows);
    }
    const kda::Status s = kda.status();
    download_all();
    kref::Pool rp = before.to_ref();
    const kref::Result res = kref::commit(L.ref(), rp, cs, drows.defined() ? rows : std::vector<int64_t>{},
                                          c.kind == Kind::kCommit ? counts : std::vector<int64_t>{}, c.null_slot);
    check_step(before, pool, rp, res, nullptr, 1, 1, s);
    return;
  }
  StepArgs a;
  a.slots = dev.put_index(slots);
  a.q = q;
  a.mode = to_mode(st.mode);
  a.accepted = dev.put_index(acc);
  if (!st.out_slots.empty()) {
    outs = make_index_1d(st.out_slots, strided);
    a.out_slots = dev.put_index(outs);
  }
  if (!st.record_rows.empty()) {
    rr = make_index_1d(st.record_rows, strided);
    a.record_rows = dev.put_index(rr);
  }
  if (c.views) {
    InputViews v = in.views();
    InputViews dv{dev.put_vec(v.qkv, in.qkv), dev.put_vec(v.out_gate, in.og), dev.put_vec(v.gate_in, in.gi),
                  dev.put_vec(v.beta, in.be)};
    kda.run_views(dv, d_out, dc, a);
  } else {
    kda.run(dev.put_vec(in.projected(), in.proj), d_out, dc, a);
  }
  const kda::Status s = kda.status();
  download_all();
  kref::Pool rp = before.to_ref();
  const kref::Result res = kref::step(L.ref(), rp, in.ref, st);
  if (c.error && B >= 3) {
    EXPECT_EQ(res.flags, uint32_t(kref::kAccepted));
  }
  const std::optional<Continued> cont = continued_from_stored(L.ref(), before.to_ref(), pool, in.ref, st, res);
  check_step(before, pool, rp, res, &out, q, 1, s, cont ? &*cont : nullptr);
}

TEST(SanitizerMatrix, EveryVariantEveryStepKind) {
  const bool gpu = have_gpu();
  std::vector<Variant> variants = {Variant::kAuto};
  if (gpu) variants = {Variant::kSplit, Variant::kWide, Variant::kWS};
  int n = 0, twins = 0, dense = 0, six = 0, five = 0, narrow = 0;
  const int sms = gpu_sms();
  uint64_t seed = 5000;
  for (Variant v : variants)
    for (Kind k : {Kind::kDecode, Kind::kDecodeOut, Kind::kAppend, Kind::kPerToken, Kind::kRecord, Kind::kFused,
                   Kind::kCommit, Kind::kFlush})
      for (int shape = 0; shape < 12; ++shape) {
        if (k == Kind::kAppend && v == Variant::kWS) continue;  // WS has no append path (refused)
        MCase c{};
        c.kind = k;
        c.variant = v;
        const bool q1 = k == Kind::kDecode || k == Kind::kDecodeOut || k == Kind::kCommit || k == Kind::kFlush ||
                        k == Kind::kAppend;
        if (shape == 0) {  // the smallest: one item
          c.H = 1, c.B = 1, c.q = q1 ? 1 : 2;
          c.ds = true, c.lb = false, c.bias = true, c.layout = 0, c.null_slot = 0;
        } else if (shape == 1) {  // pads, an error, strided tables, SD, bf16 state, fp32 windows
          c.H = 3, c.B = 4, c.q = q1 ? 1 : 4;
          c.ds = false, c.lb = true, c.bias = false, c.layout = 1, c.null_slot = -1, c.error = true;
          c.state_bf16 = true, c.conv_f32 = true, c.views = k == Kind::kPerToken || k == Kind::kFused;
          c.gate1 = v != Variant::kWS && k != Kind::kCommit && k != Kind::kFlush;
        } else if (shape == 3) {  // 544 items: 5 per persistent CTA, so WS ring stages and
          // Stream operand stages are reused (the producer/consumer hand-over under racecheck)
          // (q = 4: the Wide kernel's compile-time q = 4 instantiation with fp32 state; record and
          // fused on Wide beyond one wave of four CTAs per SM: its dense form, five per SM;
          // append on Wide: the fp32 q = 1 kernel at six per SM)
          if (k != Kind::kDecode && k != Kind::kPerToken && k != Kind::kRecord && k != Kind::kFused &&
              k != Kind::kAppend)
            continue;
          c.H = 4, c.B = 136, c.q = q1 ? 1 : 4;
          c.ds = true, c.lb = false, c.bias = true, c.layout = 0, c.null_slot = -1;
          c.gate1 = v != Variant::kWS;  // several gate tiles (136·q rows), a partial last one
        } else if (shape == 4) {  // bf16 state, 544 items: the Wide kernel at six CTAs per SM
          if (!gpu || v != Variant::kWide || (k != Kind::kDecode && k != Kind::kAppend)) continue;
          c.H = 4, c.B = 136, c.q = 1;
          c.ds = false, c.lb = true, c.bias = true, c.layout = 1, c.null_slot = -1;
          c.state_bf16 = true, c.gate1 = true;
        } else if (shape == 5 || shape == 6) {
          // bf16 state, gate mode 1, the Wide kernel's compile-time q = 8 (pads, an error) and
          // q = 16 instantiations (Split runs its run-time q kernel on the same shape)
          if (q1 || v == Variant::kWS || (shape == 6 && k == Kind::kPerToken)) continue;
          c.H = 3, c.B = shape == 5 ? 5 : 2, c.q = shape == 5 ? 8 : 16;
          c.ds = shape == 6, c.lb = shape == 5, c.bias = true, c.layout = shape == 5 ? 1 : 0, c.null_slot = -1;
          c.state_bf16 = true, c.gate1 = true, c.error = shape == 5;
        } else if (shape == 8) {
          // bf16 state, 32 items on Split: clusters of two, each CTA's 64 rows as one chunk on the
          // kernels compiled for two CTAs per SM (cuda_config::split2_bf16_q1_one_chunk)
          if (!gpu || v != Variant::kSplit || !q1 || k == Kind::kCommit || k == Kind::kFlush) continue;
          c.H = 32, c.B = 1, c.q = 1;
          c.ds = true, c.lb = true, c.bias = true, c.layout = 0, c.null_slot = -1;
          c.state_bf16 = true;
        } else if (shape == 7) {
          // fp32 state, q = 4, gate mode 1, eight items: a fused step on Wide runs the fp32 q = 4
          // fold-warp twin (its fold warps hand chunks to the main warps through mbarriers)
          if (q1 || v == Variant::kWS) continue;
          c.H = 4, c.B = 2, c.q = 4;
          c.ds = false, c.lb = false, c.bias = true, c.layout = 0, c.null_slot = -1, c.gate1 = true;
        } else if (shape == 10) {
          // bf16 state, more than one wave of six CTAs per SM: decode and per_token (q = 1) on the narrow form
          // (the policy asks for it on every card: Policy::narrow 'on'; 128-thread CTAs, 16-row chunks in three stages)
          if (!gpu || v != Variant::kWide || (k != Kind::kDecode && k != Kind::kPerToken)) continue;
          c.H = 4, c.B = kda::heuristics::kStepBf16Q1CtasPerSm * sms / 4 + 3, c.q = 1;
          c.ds = k == Kind::kDecode, c.lb = true, c.bias = true, c.layout = 0, c.null_slot = -1;
          c.state_bf16 = true, c.gate1 = k == Kind::kDecode, c.gate2 = k == Kind::kPerToken, c.narrow = true;
        } else if (shape == 11) {
          // fp32 append at Qr = 16 (pending up to Qr: a full row on the way), 544 items: the fp32 q = 1 kernel compiled
          // for five CTAs per SM (six CTAs' staged records do not fit)
          if (!gpu || v != Variant::kWide || k != Kind::kAppend) continue;
          c.H = 4, c.B = 136, c.q = 1, c.qr = 16;
          c.ds = true, c.lb = false, c.bias = true, c.layout = 1, c.null_slot = -1, c.gate1 = true;
        } else if (shape == 9) {
          // record and fused at q = 1, gate mode 0 (one item): the recording kinds' q = 1 kernels read f_a that
          // other threads staged, behind the staged-inputs barrier that only the F_B dot needs there
          // (StepTraits::kStagedBarrierForFbOnly; without it racecheck reports the F_B dot's reads, ladder_s51)
          if (k != Kind::kRecord && k != Kind::kFused) continue;
          c.H = 1, c.B = 1, c.q = 1;
          c.ds = false, c.lb = true, c.bias = true, c.layout = 1, c.null_slot = 0;
        } else {  // q = 16, gate mode 2, column-major tables, a null slot that is not 0
          if (q1 && k != Kind::kDecode) continue;
          // two WS ring stages of q = 16 do not fit: 'ws' refuses these keys when planned
          if (v == Variant::kWS && !q1) continue;
          c.H = 2, c.B = 3, c.q = q1 ? 1 : 16;
          c.ds = true, c.lb = false, c.bias = true, c.layout = 2, c.null_slot = 5, c.gate2 = true, c.error = true;
        }
        kda::counters::last_step_fold_warps.store(0);
        kda::counters::last_step_kernel_ctas_per_sm.store(0);
        run_mcase(c, gpu, seed++);
        twins += kda::counters::last_step_fold_warps.load() > 0;
        dense += kda::counters::last_step_kernel_ctas_per_sm.load() == kda::cuda_config::kDenseVerifyCtasPerSm;
        six += kda::counters::last_step_kernel_ctas_per_sm.load() == 6;
        five += k == Kind::kAppend && kda::counters::last_step_kernel_ctas_per_sm.load() == 5;
        narrow += kda::cuda_config::kNarrowCtasPerSm > 0 &&
                  kda::counters::last_step_kernel_ctas_per_sm.load() == kda::cuda_config::kNarrowCtasPerSm;
        ++n;
      }
  // the twins run where they are compiled with fold warps (cuda_config::fold_warps); the 544-item
  // shapes reach the dense form beyond one wave of four CTAs per SM, and the six-CTA q = 1
  // kernels beyond the spread grids (three per SM): on the H200's 132 SMs both
  if (gpu && kda::cuda_config::fold_warps(1, 4, kda::cuda_config::kFoldWarpsMinBlocks) > 0)
    EXPECT_GE(twins, 1) << "no case ran a fold-warp twin";
  if (gpu && 544 > 4 * sms) EXPECT_GE(dense, 2) << "the dense verify form ran in fewer than two cases (record, fused)";
  // bf16 decode and append (shape 4), fp32 append (shape 3)
  if (gpu && 544 > 3 * sms && kda::heuristics::kStepBf16Q1CtasPerSm == 6 &&
      kda::heuristics::kStepF32AppendCtasPerSm == 6)
    EXPECT_GE(six, 3) << "the six-CTA q = 1 kernels ran in fewer than three cases";
  // fp32 append at Qr = 16 (shape 11) beyond the spread grids
  if (gpu && 544 > 3 * sms && kda::heuristics::kStepF32AppendCtasPerSm == 6)
    EXPECT_EQ(five, 1) << "the fp32 kernel compiled for five CTAs per SM ran in other than one case (append, Qr = 16)";
  if (gpu && kda::cuda_config::kNarrowCtasPerSm > 0)
    EXPECT_EQ(narrow, 2) << "the narrow form ran in other than two cases (decode, per_token)";
  // B = 0 on every variant and kind (no launch, nothing written)
  for (Variant v : variants)
    for (Kind k : {Kind::kDecode, Kind::kPerToken, Kind::kFused, Kind::kCommit, Kind::kFlush}) {
      MCase c{};
      c.kind = k;
      c.variant = v;
      c.H = 2, c.B = 0, c.q = k == Kind::kPerToken || k == Kind::kFused ? 3 : 1;
      c.ds = true, c.layout = 0, c.null_slot = 0;
      run_mcase(c, gpu, seed++);
      ++n;
    }
  std::cout << "[sanitizer-matrix] " << n << " cases on the " << (gpu ? "GPU" : "CPU (self-check, no GPU)") << " ("
            << twins << " on the fold-warp twins, " << dense << " on the dense verify form, " << six
            << " on the six-CTA q = 1 kernels, " << five << " on the five-CTA fp32 one, " << narrow << " on the narrow form)\n";
}

}  // namespace
}  // namespace kt
