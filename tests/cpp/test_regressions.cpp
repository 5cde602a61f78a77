// Named regression tests for the bug classes that hit other KDA / GDN decode kernels, on the
// CPU backend through kda::PreparedKda, each checked against the float64 reference (check.h
// check_step: status, out, written state / records / windows / pending, and every byte the
// step does not own bitwise unchanged). The GPU versions of the same classes are in
// tests/python/test_regressions.py (one per forced variant); existing coverage is named
// where it already exists.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "world.h"

namespace kt {
namespace {

using kref::Mode;
using ::testing::HasSubstr;



std::vector<unsigned char> state_tile(const PoolData& p, int64_t slot) {
  const size_t es = p.state_es(), o = size_t(p.state_off(slot, 0, 0, 0)) * es;
  return std::vector<unsigned char>(p.state.begin() + o, p.state.begin() + o + size_t(p.sp.H) * K * K * es);
}


// =========================================================================================
// Padding with -1 and with 0 (the null slot) while slot 0 holds live data where 0 is not the
// null slot: kernels that treat slot 0 (or row 0) as a pad unconditionally, or -1 as a huge
// unsigned id, fail here.
// =========================================================================================
TEST(Regression, PadMinusOneAndNullSlotWhileSlotZeroIsLive) {
  for (int null_slot : {0, -1, 7}) {
    SCOPED_TRACE("null_slot " + std::to_string(null_slot));
    const bool zero_live = null_slot != 0;
    const int64_t pad_null = null_slot >= 0 ? null_slot : -3;  // the null slot, or another negative id
    World w(2100 + null_slot, layer_opts(2, null_slot == 7), pool_spec(2, 2 + 3 + 1, 10, 4), null_slot);
    for (int64_t r = 0; r < 10; ++r) w.set_pending(r, 0);
    auto zero_changed = [&](const PoolData& before) { return state_tile(before, 0) != state_tile(w.pool, 0); };

    // decode: slot 0 live (or the null slot), pads -1 and the null slot
    PoolData before = w.pool;
    OutBuf out;
    w.step(make_step(Mode::kDecode, 1, column({0, -1, 3, pad_null, 4})), 1, {}, 0, nullptr, &out);
    EXPECT_EQ(zero_changed(before), zero_live) << "decode: slot 0 written exactly when it is live";
    for (int r : {1, 3})
      for (int c = 0; c < out.D; ++c) ASSERT_EQ(out.at(r, c), 0) << "pad row " << r;

    // per_token: slot 0 as the window / first state slot, pads at t > 0 (-1 and the null slot)
    before = w.pool;
    w.step(make_step(Mode::kPerToken, 3, {{0, 1, -1}, {-1, 2, 3}, {4, pad_null, 5}, {pad_null, 6, 8}}, {1, 1, 1, 1}), 1);
    EXPECT_EQ(zero_changed(before), zero_live) << "per_token: slot 0";
    EXPECT_NE(state_tile(before, 4), state_tile(w.pool, 4));
    EXPECT_EQ(state_tile(before, 6), state_tile(w.pool, 6)) << "a pad request wrote its t > 0 slot";

    // record with records row 0, then commit and flush of slot 0 / row 0
    const std::vector<float> kg0 = w.pool.kg;
    w.step(make_step(Mode::kRecord, 2, column({3, 0, -1}), {}, {}, {0, 5, 1}), 2);
    const bool row0 = std::memcmp(&w.pool.kg[w.pool.kg_off(0, 0, 0)], &kg0[w.pool.kg_off(0, 0, 0)], 4 * 2 * K) != 0;
    EXPECT_EQ(row0, zero_live) << "records row 0 written exactly when 0 is not the null slot";
    before = w.pool;
    w.fold({0, -1, 3}, {5, 1, 0}, {2, 2, 1}, 3);
    EXPECT_EQ(zero_changed(before), zero_live) << "commit into checkpoint 0";
    w.set_pending(5, 2);
    w.set_pending(0, 1);
    before = w.pool;
    w.fold({0, 3, pad_null}, {5, 0, 2}, {}, 4);
    EXPECT_EQ(zero_changed(before), zero_live) << "flush into checkpoint 0";
    // fused from checkpoint 0 with pending = accepted
    w.set_pending(5, 2);
    before = w.pool;
    w.step(make_step(Mode::kFused, 2, column({0, -1, pad_null}), {2, 1, 1}, {}, {5, 1, 2}), 5);
    EXPECT_EQ(zero_changed(before), zero_live) << "fused on checkpoint 0";
    EXPECT_TRUE(w.kda->status().ok());
  }
}

// =========================================================================================
// [K, V] vs [V, K] state confusion
// =========================================================================================
TEST(Regression, StateKVLayoutRejectedNamingTheLayout) {
  World w(2200, layer_opts(2), pool_spec(2, 4, 6, 2));
  InputData in = random_inputs(w.rng, 2, 2);
  OutBuf out = make_out(2, 2 * K);
  Index s = make_index_1d({1, 2}, 0), cnt = make_index_1d({1, 1}, 0);
  const PoolData snap = w.pool;
  for (int which = 0; which < 3; ++which) {
    Caches c = w.pool.caches();
    if (which == 0) std::swap(c.state.strides[2], c.state.strides[3]);  // a [K, V] pool seen as [V, K]: K strided
    if (which == 1) c.state.strides[2] = 2 * K;                            // rows not dense
    if (which == 2) c.state.strides[1] = int64_t(K) * K + 128;             // heads not dense
    for (int op = 0; op < 5; ++op) {
      const std::string msg = invalid_message([&] {
        StepArgs a;
        a.slots = s.view;
        if (op == 0) w.kda->prepare(c);
        if (op == 1) w.kda->run(in.projected(), out.view(), c, a);
        if (op == 2) {
          a.mode = StepMode::kRecord;
          w.kda->run(in.projected(), out.view(), c, a);
        }
        if (op == 3) w.kda->commit(c, s.view, TensorView{}, cnt.view);
        if (op == 4) w.kda->flush(c, s.view, TensorView{});
      });
      SCOPED_TRACE("layout " + std::to_string(which) + " operation " + std::to_string(op) + ": " + msg);
      EXPECT_THAT(msg, HasSubstr("state: expected inner [H, V, K] dense"));
      EXPECT_THAT(msg, HasSubstr("VK layout"));
      EXPECT_THAT(msg, HasSubstr("[K, V]"));
      EXPECT_THAT(msg, HasSubstr("strides"));
    }
  }
  EXPECT_TRUE(w.pool.state == snap.state && w.pool.conv == snap.conv);
  EXPECT_TRUE(w.kda->status().ok());
}

TEST(Regression, ContiguousKVPoolCannotBeToldApartCallersDuty) {
  // A contiguous pool that holds each head's state transposed ([K, V]) has exactly the strides
  // of a VK pool: it is accepted and read as [V, K] (docs/VALIDATION.md: the caller's duty).
  // The step then equals the reference fed those bytes as VK — and is far from the result the
  // [K, V] caller meant.
  World w(2210, layer_opts(2, false, true), pool_spec(2, 3, 5));
  PoolData kv = w.pool;  // the transposed copy
  for (int64_t s = 0; s < 5; ++s)
    for (int h = 0; h < 2; ++h)
      for (int v = 0; v < K; ++v)
        for (int k = 0; k < K; ++k) kv.state_set(s, h, v, k, w.pool.state_get(s, h, k, v));
  const kref::Pool meant = w.pool.to_ref();  // the caller's states (stored [K, V] in `kv`)
  w.pool = kv;
  w.resync();  // the reference reads the bytes as [V, K], like the library
  OutBuf out;
  InputData in;
  const kref::Step st = make_step(Mode::kDecode, 1, column({1, 3}));
  w.step(st, 1, {}, 0, &in, &out);  // passes: checked against the VK reading of the bytes
  kref::Pool mp = meant;
  kref::Step st2 = st;
  const kref::Result res = kref::step(w.RL, mp, in.ref, st2);
  double worst = 0, M = 0;
  for (double x : res.out) M = std::max(M, std::fabs(x));
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < out.D; ++c) worst = std::max(worst, std::fabs(unbf(out.at(r, c)) - res.out[size_t(r) * out.D + c]));
  EXPECT_GT(worst, 0.05 * M) << "a transposed pool should give a visibly different output";
}

// =========================================================================================
// Block-table column slices as slot tensors (row stride != q)
// =========================================================================================
TEST(Regression, BlockTableColumnSlicesAsSlotTensors) {
  // data.h make_index_2d layout 1: columns [2, 2 + cols) of a [B, cols + 5] table, so the row
  // stride is cols + 5 != q; make_index_1d layout 1: column 1 of a [B, 3] table. Garbage ids
  // (977 / -977) around the view must never be read.
  for (int extra_cols : {0, 2}) {
    SCOPED_TRACE("row width q + " + std::to_string(extra_cols));
    const int q = 3, cols = q + extra_cols;
    World w(2300 + extra_cols, layer_opts(3, true), pool_spec(3, 2 + q + extra_cols, 3 * cols + 4, cols));
    std::vector<std::vector<int64_t>> rows = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}};
    for (int b = 0; b < 3; ++b)
      for (int e = 0; e < extra_cols; ++e) rows[b].push_back(10 + b * extra_cols + e);
    // accepted may name any column of the row, also one >= q
    std::vector<int64_t> acc = {1, int64_t(cols), int64_t(std::min(cols, 2))};
    w.step(make_step(Mode::kPerToken, q, rows, acc), 1, {}, /*table slice*/ 1);
    w.step(make_step(Mode::kPerToken, 1, rows, acc), 2, {}, 1);
    w.step(make_step(Mode::kDecode, 1, column({1, 4, 7}), {}, {2, 5, 8}), 3, {}, 1);
    w.step(make_step(Mode::kRecord, q, column({2, 5, 8}), {1, 2, 1}, {}, {3, 6, 9}), 4, {}, 1);
    w.fold({2, 5, 8}, {3, 6, 9}, {1, 3, 2}, 5);
    w.set_pending(3, 2);
    w.step(make_step(Mode::kFused, q, column({2, 5, 8}), {2, 1, 1}, {}, {3, 6, 9}), 6, {}, 1);
    // other layouts of the same tables: column-major and every other column
    w.step(make_step(Mode::kPerToken, q, rows, acc), 7, {}, 2);
    w.step(make_step(Mode::kPerToken, q, rows, acc), 8, {}, 3);
  }
  // decode / record / fused slots given as a [B, 1] column slice of a 2-D block table
  World w(2310, layer_opts(2), pool_spec(2, 4, 8, 2));
  for (Mode m : {Mode::kDecode, Mode::kRecord, Mode::kFused}) {
    const int q = m == Mode::kDecode ? 1 : 2;
    StepSpec sp;
    sp.ref = make_step(m, q, column({1, 6, -1}));
    sp.ref.null_slot = 0;
    sp.slots_2d = true;
    sp.strided = 1;
    InputData in = random_inputs(w.rng, 3 * q, 2);
    OutBuf out = make_out(3 * q, 2 * K);
    const PoolData before = w.pool;
    run_step(*w.kda, w.pool, in, out, sp);
    const kref::Result res = kref::step(w.RL, w.rp, in.ref, sp.ref);
    check_step(before, w.pool, w.rp, res, &out, q, 1 + int(m), w.kda->status());
  }
}

// =========================================================================================
// Accepted counts of 0, above window - W + 2, or (per_token) above the slot row width: a
// caller error found in the data — flagged (ACCEPTED, lowest request), nothing written.
// =========================================================================================
TEST(Regression, AcceptedOutOfRangeFlaggedNothingWritten) {
  // window 6, W 4: accepted in [1, 4]
  const int window = 6;
  struct Bad {
    Mode mode;
    int q;
    std::vector<std::vector<int64_t>> slots;
    std::vector<int64_t> acc;
    int first;
  };
  const std::vector<Bad> cases = {
      {Mode::kDecode, 1, column({1, 2, 3}), {1, 0, 1}, 1},
      {Mode::kDecode, 1, column({1, 2, 3}), {-1, 1, 5}, 0},
      {Mode::kDecode, 1, column({1, 2}), {1, 2147483647}, 1},
      {Mode::kPerToken, 2, {{1, 2}, {3, 4}, {5, 6}}, {2, 3, 1}, 1},      // 3 > row width 2 (fits the window)
      {Mode::kPerToken, 2, {{1, 2, 7}, {3, 4, 8}}, {3, 5}, 1},          // 5 > window - W + 2
      {Mode::kPerToken, 1, column({1, 2}), {2, 1}, 0},                    // [B] slots: row width 1
      {Mode::kRecord, 3, column({1, 2, 3}), {4, 0, 2}, 1},
      {Mode::kFused, 2, column({1, 2, 3}), {1, 5, 1}, 1},
  };
  uint64_t seed = 2400;
  for (const Bad& c : cases) {
    ++seed;
    SCOPED_TRACE("mode " + std::to_string(int(c.mode)) + " seed " + std::to_string(seed));
    World w(seed, layer_opts(2, seed % 2), pool_spec(2, window, 10, 4));
    for (int64_t r = 0; r < 10; ++r) w.set_pending(r, 1);  // fused: the good requests fold one record
    // the bad request's pending must be valid on its own (0), else PENDING is raised too
    if (c.mode == Mode::kFused) w.set_pending(c.slots[size_t(c.first)][0], 0);
    kref::Step st = make_step(c.mode, c.q, c.slots, c.acc);
    st.null_slot = w.null_slot;
    const int B = int(st.slots.size());
    InputData in = random_inputs(w.rng, B * c.q, 2);
    OutBuf out = make_out(B * c.q, 2 * K);
    const PoolData before = w.pool;
    StepSpec sp;
    sp.ref = st;
    run_step(*w.kda, w.pool, in, out, sp);  // no exception: data errors are flagged
    const kref::Result res = kref::step(w.RL, w.rp, in.ref, st);
    const kda::Status s = w.kda->status();
    EXPECT_EQ(s.flags, uint32_t(kda::kAccepted)) << s.describe();
    EXPECT_EQ(s.first_request, c.first);
    check_step(before, w.pool, w.rp, res, &out, c.q, 1, s);  // zero rows, nothing of the bad request written
    EXPECT_TRUE(w.kda->status().ok()) << "status() clears";
  }
}

// =========================================================================================
// Pools larger than 2^31 bytes, slot ids whose byte offset exceeds int32
// =========================================================================================
int64_t mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  int64_t v = 0;
  while (f >> key >> v >> unit)
    if (key == "MemAvailable:") return v * 1024;
  return -1;
}

TEST(Regression, PoolsBeyond2GiBSlotByteOffsetsBeyondInt32) {
  // Decode and per_token with states at 4.6e9 bytes and windows at 2.6e9 bytes:
  // Contract.SlotByteOffsetsBeyond2To31And2To32 (test_contract.cpp). Here the verify kinds:
  // record checkpoints, commit, fused and flush on a state pool of 70001 slots (4.6e9 bytes,
  // slot 70000 at 4.59e9) with fp32 windows of 24 columns (2.6e9 bytes); the same steps run
  // on a small pool holding the same data must give the same bits.
  const int64_t nslots = 70001;
  const int H = 1, window = 24, Qr = 4;
  const int64_t C = 3 * int64_t(H) * K;
  const int64_t avail = mem_available();
  if (avail >= 0 && avail < int64_t(2300) << 20) GTEST_SKIP() << "needs ~2.2 GB of free memory";
  const size_t sb = size_t(nslots) * H * K * K * 4, cb = size_t(nslots) * C * window * 4;
  void* big_state = std::calloc(sb, 1);
  void* big_conv = std::calloc(cb, 1);
  if (!big_state || !big_conv) {
    std::free(big_state);
    std::free(big_conv);
    GTEST_SKIP() << "could not allocate " << (sb + cb) << " bytes";
  }
  Rng rng(2500);
  LayerData L = random_layer(rng, layer_opts(H, true, true));
  auto kda = make_kda(L, true, 0);
  PoolSpec ps = pool_spec(H, window, 5, Qr);
  ps.conv_f32 = true;
  ps.rows_r = 6;
  PoolData small = make_pool(ps);
  small.randomize(rng);
  const int64_t map[5] = {0, 70000, 69999, 32768, 65537};  // small slot -> big slot
  float* bs = static_cast<float*>(big_state);
  float* bc = static_cast<float*>(big_conv);
  const int64_t st_slot = int64_t(H) * K * K, cv_slot = C * window;
  auto to_big = [&]() {
    for (int s = 1; s < 5; ++s) {
      std::memcpy(bs + map[s] * st_slot, small.state.data() + size_t(s * st_slot) * 4, size_t(st_slot) * 4);
      std::memcpy(bc + map[s] * cv_slot, small.conv.data() + size_t(s * cv_slot) * 4, size_t(cv_slot) * 4);
    }
  };
  to_big();
  PoolData recs = small;  // the big run's records / pending (rows are small ids either way)
  auto big_caches = [&]() {
    Caches c = recs.caches();
    c.conv_state = make_view(big_conv, DType::kF32, {nslots, C, window});
    c.state = make_view(big_state, DType::kF32, {nslots, H, K, K});
    return c;
  };
  kda->prepare(big_caches());
  auto same_as_small = [&](const char* what) {
    for (int s = 1; s < 5; ++s) {
      EXPECT_EQ(0, std::memcmp(bs + map[s] * st_slot, small.state.data() + size_t(s * st_slot) * 4, size_t(st_slot) * 4))
          << what << ": state of slot " << map[s];
      EXPECT_EQ(0, std::memcmp(bc + map[s] * cv_slot, small.conv.data() + size_t(s * cv_slot) * 4, size_t(cv_slot) * 4))
          << what << ": window of slot " << map[s];
    }
    EXPECT_TRUE(recs.corr == small.corr && recs.kg == small.kg && recs.pending == small.pending) << what << ": records";
  };
  const std::vector<int64_t> ck = {1, 2, 3}, rows = {1, 2, 5};
  std::vector<int64_t> big_ck;
  for (int64_t s : ck) big_ck.push_back(map[s]);
  auto run_both = [&](Mode m, int q, std::vector<int64_t> acc, const char* what) {
    InputData in = random_inputs(rng, 3 * q, H);
    OutBuf os = make_out(3 * q, H * K), ob = make_out(3 * q, H * K);
    StepSpec sp;
    sp.ref = make_step(m, q, column(ck), acc, {}, rows);
    run_step(*kda, small, in, os, sp);
    Index sl = make_index_1d(big_ck, 1), ac = make_index_1d(acc, 0), rr = make_index_1d(rows, 2);
    StepArgs a;
    a.slots = sl.view;
    a.q = q;
    a.mode = to_mode(m);
    a.accepted = ac.view;
    a.record_rows = rr.view;
    kda->run(in.projected(), ob.view(), big_caches(), a);
    EXPECT_TRUE(kda->status().ok()) << what;
    EXPECT_TRUE(os.mem == ob.mem) << what << ": outputs differ between the small and the big pool";
    same_as_small(what);
  };
  run_both(Mode::kRecord, 3, {1, 2, 3}, "record");
  {
    Caches c = small.caches();
    Index s1 = make_index_1d(ck, 0), r1 = make_index_1d(rows, 0), n1 = make_index_1d({3, 1, 2}, 0);
    kda->commit(c, s1.view, r1.view, n1.view);
    Index s2 = make_index_1d(big_ck, 0);
    kda->commit(big_caches(), s2.view, r1.view, n1.view);
    EXPECT_TRUE(kda->status().ok());
    same_as_small("commit");
  }
  for (size_t b = 0; b < rows.size(); ++b) small.pending[size_t(rows[b])] = recs.pending[size_t(rows[b])] = int32_t(b + 1);
  run_both(Mode::kFused, 2, {1, 2, 3}, "fused");
  for (size_t b = 0; b < rows.size(); ++b) small.pending[size_t(rows[b])] = recs.pending[size_t(rows[b])] = 2;
  {
    Index s1 = make_index_1d(ck, 0), r1 = make_index_1d(rows, 0), s2 = make_index_1d(big_ck, 0);
    kda->flush(small.caches(), s1.view, r1.view);
    kda->flush(big_caches(), s2.view, r1.view);
    EXPECT_TRUE(kda->status().ok());
    same_as_small("flush");
  }
  // untouched slots (zero pages) stay zero
  for (int64_t s : {int64_t(0), int64_t(4), int64_t(32767), int64_t(65536), int64_t(69998)}) {
    bool zero = true;
    for (int64_t i = 0; i < st_slot; ++i) zero &= bs[s * st_slot + i] == 0.f;
    for (int64_t i = 0; i < cv_slot; ++i) zero &= bc[s * cv_slot + i] == 0.f;
    EXPECT_TRUE(zero) << "slot " << s << " was written";
  }
  std::free(big_state);
  std::free(big_conv);
}

// =========================================================================================
// Non-contiguous slot stride in the state pool (padded slots, a per-layer slice of a stacked
// multi-layer pool), with padded window slots and records rows: every step kind; the padding
// bytes are checked bitwise unchanged by check_step.
// =========================================================================================
TEST(Regression, NonContiguousStateSlotStride) {
  int seed = 2600;
  for (int64_t extra : {int64_t(1), int64_t(7), int64_t(4) * 2 * K * K /* layer 0 of [slots, 5 layers, H, V, K] */})
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE("state slot stride H·V·K + " + std::to_string(extra) + (bf16 ? " bf16" : " fp32"));
      PoolSpec ps = pool_spec(2, 6, 12, 4, seed % 2 == 0, bf16);
      ps.state_slot_extra = extra;
      ps.conv_slot_extra = 3 + extra % 5;
      ps.rec_row_extra = 5;
      ++seed;
      World w(seed, layer_opts(2, seed % 2 == 0), ps);
      w.remirror = bf16;
      double n = 0;
      w.step(make_step(Mode::kDecode, 1, column({1, 11, -1})), ++n);
      w.step(make_step(Mode::kDecode, 1, column({2, 3}), {}, {4, 5}), ++n);
      w.step(make_step(Mode::kPerToken, 3, {{6, 7, 8}, {9, 10, 11}}, {1, 3}), ++n);
      w.step(make_step(Mode::kRecord, 4, column({1, 4}), {2, 1}, {}, {2, 7}), ++n);
      w.fold({1, 4}, {2, 7}, {3, 4}, ++n);
      w.set_pending(2, 2);
      w.step(make_step(Mode::kFused, 2, column({1, 4}), {2, 1}, {}, {2, 7}), ++n);
      w.set_pending(7, 2);
      w.fold({1, 4}, {2, 7}, {}, ++n);
    }
}

// =========================================================================================
// Zero-length batches (B = 0)
// =========================================================================================
TEST(Regression, ZeroLengthBatch) {
  // Every step kind with an empty batch is a no-op: Contract.ZeroRequestsIsANoOp
  // (test_contract.cpp) covers run / run_views / commit / flush with bare slots. Here with every
  // optional index tensor given (empty, strided), planned ahead as a B = 0 policy key too.
  Rng rng(2700);
  LayerData L = random_layer(rng, layer_opts(2));
  std::unordered_map<StepKey, Policy, kda::StepKeyHash> pols;
  for (StepMode m : {StepMode::kDecode, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused})
    pols[StepKey{m, 0, m == StepMode::kDecode ? 1 : 2}] = Policy{};
  auto kda = make_kda(L, false, 0, pols);
  PoolData pool = make_pool(pool_spec(2, 4, 5, 2, false));
  pool.randomize(rng);
  for (int r = 0; r < 5; ++r) pool.pending[size_t(r)] = 1;
  kda->prepare(pool.caches());
  const PoolData snap = pool;
  std::vector<uint16_t> proj(size_t(4 * 2 * K + R + 2) + 8, 0x7fc1);
  uint16_t out_mem[4] = {kPoison, kPoison, kPoison, kPoison};
  int32_t ids[16];
  for (int i = 0; i < 16; ++i) ids[i] = 1 + i % 4;
  for (StepMode m : {StepMode::kDecode, StepMode::kPerToken, StepMode::kRecord, StepMode::kFused}) {
    const int q = m == StepMode::kDecode ? 1 : 2;
    StepArgs a;
    a.mode = m;
    a.q = q;
    a.slots = m == StepMode::kPerToken ? make_view(ids, DType::kI32, {0, q}, {7, 1}) : make_view(ids, DType::kI32, {0}, {3});
    a.accepted = make_view(ids + 1, DType::kI32, {0}, {2});
    if (m == StepMode::kDecode) a.out_slots = make_view(ids + 2, DType::kI32, {0}, {5});
    if (m == StepMode::kRecord || m == StepMode::kFused) a.record_rows = make_view(ids + 3, DType::kI32, {0}, {4});
    EXPECT_NO_THROW(kda->run(make_view(proj.data(), DType::kBF16, {0, int64_t(proj.size())}),
                             make_view(out_mem, DType::kBF16, {0, 2 * K}), pool.caches(), a))
        << mode_name(m);
    InputData in = random_inputs(rng, 0, 2);
    EXPECT_NO_THROW(kda->run_views(in.views(), make_view(out_mem, DType::kBF16, {0, 2 * K}), pool.caches(), a))
        << mode_name(m);
  }
  kda->commit(pool.caches(), make_view(ids, DType::kI32, {0, 1}, {3, 1}), make_view(ids, DType::kI32, {0}, {2}),
              make_view(ids, DType::kI32, {0}, {2}));
  kda->flush(pool.caches(), make_view(ids, DType::kI32, {0}), make_view(ids, DType::kI32, {0}, {2}));
  EXPECT_TRUE(pool.conv == snap.conv && pool.state == snap.state && pool.corr == snap.corr && pool.kg == snap.kg &&
              pool.pending == snap.pending);
  for (uint16_t x : out_mem) EXPECT_EQ(x, kPoison);
  EXPECT_TRUE(kda->status().ok());
}

// =========================================================================================
// The error flag: raised in the data, read with status() after the fact, cleared on read
// (on the GPU: tests/python/test_regressions.py also checks that run never synchronises).
// =========================================================================================
TEST(Regression, ErrorFlagReadAfterTheFactClearedOnRead) {
  World w(2800, layer_opts(2), pool_spec(2, 6, 10, 3));
  auto run = [&](const kref::Step& st) {
    kref::Step s = st;
    s.null_slot = w.null_slot;
    const int B = int(s.slots.size());
    InputData in = random_inputs(w.rng, B * s.q, 2);
    OutBuf out = make_out(B * s.q, 2 * K);
    StepSpec sp;
    sp.ref = s;
    EXPECT_NO_THROW(run_step(*w.kda, w.pool, in, out, sp));
  };
  EXPECT_TRUE(w.kda->status().ok());
  run(make_step(Mode::kDecode, 1, column({1, 2, 3, 10})));     // SLOT_RANGE at 3
  run(make_step(Mode::kDecode, 1, column({1, 2, 3}), {1, 9, 1}));  // ACCEPTED at 1
  run(make_step(Mode::kDecode, 1, column({4, 5})));             // fine: flags stay
  kda::Status s = w.kda->status();
  EXPECT_EQ(s.flags, uint32_t(kda::kSlotRange | kda::kAccepted)) << s.describe();
  EXPECT_EQ(s.first_request, 1);
  s = w.kda->status();
  EXPECT_TRUE(s.ok()) << "status() clears the flags: " << s.describe();
  EXPECT_EQ(s.first_request, -1);
  run(make_step(Mode::kPerToken, 2, {{1, 2}, {3, -1}}, {1, 2}));  // PAD_START at 1
  s = w.kda->status();
  EXPECT_EQ(s.flags, uint32_t(kda::kPadStart));
  EXPECT_EQ(s.first_request, 1);
}

// =========================================================================================
// Fused steps whose pending count exceeds q (pending = accepted <= window - W + 2 may be
// larger than the step's q, e.g. q = 1 after a q = 4 verify). The Stream kernel staged only
// q records per item in shared memory (fixed: include/kda/cuda/config.h StreamSmem::rec_cap);
// on the CPU: the fold of all pending records, and fused == flush + fused(0) bitwise.
// =========================================================================================
TEST(Regression, FusedPendingAboveQ) {
  for (bool bf16 : {false, true})
    for (int q : {1, 2}) {
      SCOPED_TRACE(std::string(bf16 ? "bf16" : "fp32") + " q " + std::to_string(q));
      const uint64_t seed = 2900 + q + 10 * bf16;
      World w(seed, layer_opts(3, q == 2), pool_spec(3, 2 + 4, 9, 4, q == 1, bf16));
      w.remirror = bf16;
      // records of a q = 4 verify, then pending = accepted in {3, 4} > q
      w.step(make_step(Mode::kRecord, 4, column({1, 2, 3}), {1, 2, 1}, {}, {4, 5, 6}), 1);
      w.set_pending(4, 4);
      w.set_pending(5, 3);
      w.set_pending(6, 0);
      const PoolData before = w.pool;
      const kref::Step fused = make_step(Mode::kFused, q, column({1, 2, 3}), {4, 3, 1}, {}, {4, 5, 6});
      InputData in;
      OutBuf out;
      w.step(fused, 2, {}, 0, &in, &out);  // vs the float64 reference
      // bitwise: fused(pending = n) == flush(n), then the same fused step with pending = 0
      PoolData b = before;
      OutBuf ob = make_out(3 * q, 3 * K, 3);  // as World::step
      run_commit(*w.kda, b, {1, 2, 3}, {4, 5, 6}, {}, false);
      StepSpec sp;
      sp.ref = fused;
      run_step(*w.kda, b, in, ob, sp);
      EXPECT_TRUE(w.kda->status().ok());
      EXPECT_TRUE(out.mem == ob.mem) << "fused(pending > q) out != flush + fused(0) out";
      EXPECT_TRUE(w.pool.state == b.state && w.pool.corr == b.corr && w.pool.kg == b.kg &&
                  w.pool.pending == b.pending && w.pool.conv == b.conv)
          << "fused(pending > q) caches != flush + fused(0) caches";
    }
}

}  // namespace
}  // namespace kt
