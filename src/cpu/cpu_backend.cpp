// src/cpu/cpu_backend.cpp — the CPU backend: the whole contract (SPEC §3, §4) in plain C++,
// fp32 throughout, parallel over requests with std::thread. It is the reference every GPU
// variant is tested against and what runs where there is no GPU.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend.h"
#include "kda/numerics.h"
#include "kda/request.h"

namespace kda {
namespace {

constexpr int K = kHeadDim;

/// Thread-safe error sink over a (flags, index) pair.
struct ErrorSink {
  uint32_t* flags;
  int32_t* index;
  std::mutex* mu;
  void raise(uint32_t f, int b) const {
    std::lock_guard<std::mutex> lock(*mu);
    *flags |= f;
    *index = std::min<int32_t>(*index, b);
  }
};

/// Runs fn(i) for i in [0, n) on up to hardware_concurrency threads. Each i is
/// independent (distinct requests own distinct slots), so the result is deterministic.
template <class Fn>
void parallel_for(int n, int64_t work_per_item, Fn&& fn) {
  const int hw = int(std::max(1u, std::thread::hardware_concurrency()));
  const int nt = int(std::min<int64_t>({int64_t(hw), int64_t(n), std::max<int64_t>(1, n * work_per_item / (1 << 20))}));
  if (nt <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  pool.reserve(nt);
  for (int t = 0; t < nt; ++t)
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) fn(i);
    });
  for (auto& th : pool) th.join();
}

// ---- cache accessors -------------------------------------------------------------------
float conv_read(const StepParams& p, int64_t slot, int64_t c, int64_t col) {
  const int64_t o = slot * p.conv_slot_stride + c * p.conv_chan_stride + col * p.conv_col_stride;
  return p.conv_f32 ? static_cast<const float*>(p.conv)[o] : bf16_to_f32(static_cast<const uint16_t*>(p.conv)[o]);
}
void conv_write(const StepParams& p, int64_t slot, int64_t c, int64_t col, float v) {
  const int64_t o = slot * p.conv_slot_stride + c * p.conv_chan_stride + col * p.conv_col_stride;
  if (p.conv_f32)
    static_cast<float*>(p.conv)[o] = v;
  else
    static_cast<uint16_t*>(p.conv)[o] = f32_to_bf16(v);
}

/// Loads the [V, K] state of (slot, head) into S (fp32).
void state_load(void* base, int bf16, int64_t slot_stride, int64_t slot, int h, float* S) {
  const int64_t o = slot * slot_stride + int64_t(h) * K * K;
  if (bf16) {
    const uint16_t* src = static_cast<const uint16_t*>(base) + o;
    for (int i = 0; i < K * K; ++i) S[i] = bf16_to_f32(src[i]);
  } else {
    std::memcpy(S, static_cast<const float*>(base) + o, sizeof(float) * K * K);
  }
}
/// Stores S to (slot, head); bf16 state is rounded to nearest even (SPEC §9).
void state_store(void* base, int bf16, int64_t slot_stride, int64_t slot, int h, const float* S) {
  const int64_t o = slot * slot_stride + int64_t(h) * K * K;
  if (bf16) {
    uint16_t* dst = static_cast<uint16_t*>(base) + o;
    for (int i = 0; i < K * K; ++i) dst[i] = f32_to_bf16(S[i]);
  } else {
    std::memcpy(static_cast<float*>(base) + o, S, sizeof(float) * K * K);
  }
}

/// S[v,i] = S[v,i]·e[i]; S[v,i] = fmaf(u[v], k[i], S[v,i]) for `n` records of (row, h).
void fold_records(float* S, const float* corr, int64_t corr_row, const float* kg, int64_t kg_row, int Qr, int64_t row,
                  int h, int n) {
  float e[K];
  for (int p = 0; p < n; ++p) {
    const float* u = corr + row * corr_row + (int64_t(h) * Qr + p) * K;
    const float* kk = kg + row * kg_row + (int64_t(h) * Qr + p) * 2 * K;
    for (int i = 0; i < K; ++i) e[i] = decay_of(kk[K + i]);
    for (int v = 0; v < K; ++v) {
      float* Sv = S + v * K;
      for (int i = 0; i < K; ++i) Sv[i] = fmaf(u[v], kk[i], Sv[i] * e[i]);
    }
  }
}

void zero_rows(const StepParams& p, int b) {
  const int D = p.H * K;
  for (int t = 0; t < p.q; ++t) std::fill_n(p.out + int64_t(b * p.q + t) * p.out_row, D, uint16_t(0));
}

void cpu_request(const StepParams& p, int b, const ErrorSink& err) {
  const RequestPlan r = resolve_request(p, b);
  if (r.kind != RequestKind::kRun) {
    zero_rows(p, b);
    if (r.kind == RequestKind::kError) err.raise(r.flags, b);
    return;
  }
  const int q = p.q, W = p.W, H = p.H, D = H * K, C = 3 * D;
  const int L = W - 1 + q;  // conv sequence: W-1 window columns, then x_0 .. x_{q-1}
  const int off = r.accepted - 1;
  const StepMode mode = StepMode(p.mode);

  // ---- conv sequence and conv + SiLU for every token and channel ------------------------
  std::vector<float> seq(size_t(C) * L), y(size_t(q) * C);
  for (int c = 0; c < C; ++c) {
    for (int j = 0; j < W - 1; ++j) seq[size_t(c) * L + j] = conv_read(p, r.win_in, c, off + j);
    for (int t = 0; t < q; ++t) seq[size_t(c) * L + W - 1 + t] = bf16_to_f32(p.qkv[int64_t(b * q + t) * p.qkv_row + c]);
  }
  for (int t = 0; t < q; ++t)
    for (int c = 0; c < C; ++c) {
      const int s = c / D, cc = c % D;
      float a = p.conv_b ? p.conv_b[c] : 0.f;
      for (int j = 0; j < W; ++j) a = fmaf(p.conv_w[(s * W + j) * D + cc], seq[size_t(c) * L + t + j], a);
      y[size_t(t) * C + c] = silu(a);
    }

  std::vector<float> S(K * K), qn(size_t(q) * K), kn(size_t(q) * K), g(size_t(q) * K), beta(q), o(K);
  // append: a full row is folded and written back first, the token's record then starts a new row
  const bool append_full = mode == StepMode::kAppend && r.pending == p.Qr;
  const int pos0 = mode == StepMode::kAppend ? (append_full ? 0 : r.pending) : 0;  // record of token 0
  for (int h = 0; h < H; ++h) {
    // ---- q/k l2 norm, gate, beta ---------------------------------------------------------
    const float a = expf(p.A_log[h]);
    for (int t = 0; t < q; ++t) {
      const float* yq = &y[size_t(t) * C + h * K];
      const float* yk = yq + D;
      float sq = 0.f, sk = 0.f;
      for (int i = 0; i < K; ++i) {
        sq = fmaf(yq[i], yq[i], sq);
        sk = fmaf(yk[i], yk[i], sk);
      }
      const float iq = 1.0f / sqrtf(sq + kL2Eps), ik = 1.0f / sqrtf(sk + kL2Eps);
      for (int i = 0; i < K; ++i) {
        qn[t * K + i] = yq[i] * iq * kQScale;
        kn[t * K + i] = yk[i] * ik;
      }
      const uint16_t* gin = p.gate_in + int64_t(b * q + t) * p.gate_in_row;
      for (int i = 0; i < K; ++i) {
        float z;
        if (p.gate_mode == int(GateMode::kPrecomputed)) {
          z = bf16_to_f32(gin[h * K + i]);
        } else {
          const uint16_t* fb = p.f_b + int64_t(h * K + i) * p.f_b_row;
          z = 0.f;
          for (int j = 0; j < kRank; ++j) z = fmaf(bf16_to_f32(fb[j]), bf16_to_f32(gin[j]), z);
        }
        z += p.dt_bias[h * K + i];
        g[t * K + i] = activate_gate(z, a, p.has_lower_bound != 0, p.lower_bound);
      }
      beta[t] = sigmoidf_(bf16_to_f32(p.beta[int64_t(b * q + t) * p.beta_row + h]));
    }

    // ---- state in. fused: fold the pending records, write the checkpoint back. append: fold
    //      them into a running copy, written back only when the row is full (SPEC §4) ---------
    state_load(p.state, p.state_bf16, p.state_slot_stride, r.state_in, h, S.data());
    if ((mode == StepMode::kFused || mode == StepMode::kAppend) && r.pending > 0) {
      fold_records(S.data(), p.correction, p.correction_row, p.key_gate, p.key_gate_row, p.Qr, r.row, h, r.pending);
      if (mode == StepMode::kFused || append_full) {
        state_store(p.state, p.state_bf16, p.state_slot_stride, r.state_in, h, S.data());
        if (p.state_bf16)
          for (auto& s : S) s = round_bf16(s);  // continue from what was stored (SPEC §9)
      }
    }

    // ---- the delta rule, token by token --------------------------------------------------
    for (int t = 0; t < q; ++t) {
      const float* kt = &kn[t * K];
      const float* qt = &qn[t * K];
      const float* vt = &y[size_t(t) * C + 2 * D + h * K];
      float e[K];
      for (int i = 0; i < K; ++i) e[i] = decay_of(g[t * K + i]);
      const bool records = mode == StepMode::kRecord || mode == StepMode::kFused || mode == StepMode::kAppend;
      float* corr = records ? p.correction + r.row * p.correction_row + (int64_t(h) * p.Qr + pos0 + t) * K : nullptr;
      for (int v = 0; v < K; ++v) {
        float* Sv = &S[v * K];
        float dot = 0.f;
        for (int i = 0; i < K; ++i) {
          Sv[i] *= e[i];
          dot = fmaf(Sv[i], kt[i], dot);
        }
        const float u = beta[t] * (vt[v] - dot);
        float ov = 0.f;
        for (int i = 0; i < K; ++i) {
          Sv[i] = fmaf(u, kt[i], Sv[i]);
          ov = fmaf(Sv[i], qt[i], ov);
        }
        o[v] = ov;
        if (records) corr[v] = u;
      }
      if (records) {
        float* kg = p.key_gate + r.row * p.key_gate_row + (int64_t(h) * p.Qr + pos0 + t) * 2 * K;
        for (int i = 0; i < K; ++i) {
          kg[i] = kt[i];
          kg[K + i] = g[t * K + i];
        }
      }
      if (mode == StepMode::kPerToken) {
        const int64_t dst = slot_at(p, b, t);
        if (!is_pad_id(dst, p.null_slot)) state_store(p.state, p.state_bf16, p.state_slot_stride, dst, h, S.data());
      }
      // ---- gated RMSNorm -> bf16 out (SPEC §9 without the output norm: bf16(o)) -----------
      if (!p.output_norm) {
        uint16_t* dst = p.out + int64_t(b * q + t) * p.out_row + h * K;
        for (int v = 0; v < K; ++v) dst[v] = f32_to_bf16(o[v]);
        continue;
      }
      float ss = 0.f;
      for (int v = 0; v < K; ++v) ss = fmaf(o[v], o[v], ss);
      const float rr = 1.0f / sqrtf(ss / float(K) + p.eps);
      const uint16_t* og = p.out_gate + int64_t(b * q + t) * p.out_gate_row + h * K;
      uint16_t* dst = p.out + int64_t(b * q + t) * p.out_row + h * K;
      for (int v = 0; v < K; ++v) dst[v] = f32_to_bf16(o[v] * rr * p.norm_w[v] * sigmoidf_(bf16_to_f32(og[v])));
    }
    if (mode == StepMode::kDecode) state_store(p.state, p.state_bf16, p.state_slot_stride, r.state_out, h, S.data());
  }

  if (mode == StepMode::kFused) p.pending[r.row * p.pending_stride] = 0;
  if (mode == StepMode::kAppend) p.pending[r.row * p.pending_stride] = pos0 + 1;
  // ---- window after the step: new[j] = seq[1 + j] for j < W-2+q ---------------------------
  const int w = W - 2 + q;
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < w; ++j) conv_write(p, r.win_out, c, j, seq[size_t(c) * L + 1 + j]);
}

class CpuBuffer final : public Buffer {
 public:
  explicit CpuBuffer(std::size_t n) : mem_(n) {}
  void* data() override { return mem_.data(); }
  std::size_t bytes() const override { return mem_.size(); }
  void upload(const void* host, std::size_t n) override { std::memcpy(mem_.data(), host, n); }

 private:
  std::vector<unsigned char> mem_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() { info_.device = Device::kCPU; }
  Device device() const override { return Device::kCPU; }
  const DeviceInfo& info() const override { return info_; }
  std::unique_ptr<Buffer> allocate(std::size_t n) override { return std::make_unique<CpuBuffer>(n); }
  void download(void* host, const void* src, std::size_t n) override { std::memcpy(host, src, n); }
  void step(const StepParams& p, const Plan&, void*) override { cpu_step(p, &flags_, &index_); }
  void commit(const CommitParams& p, void*) override { cpu_commit(p, &flags_, &index_); }
  uint32_t* error_flags() override { return &flags_; }
  int32_t* error_index() override { return &index_; }
  Status read_status(void*) override {
    Status s;
    s.flags = flags_;
    s.first_request = flags_ ? index_ : -1;
    flags_ = 0;
    index_ = INT32_MAX;
    return s;
  }

 private:
  DeviceInfo info_;
  uint32_t flags_ = 0;
  int32_t index_ = INT32_MAX;
};

}  // namespace

void cpu_step(const StepParams& p, uint32_t* flags, int32_t* index) {
  std::mutex mu;
  const ErrorSink err{flags, index, &mu};
  parallel_for(p.B, int64_t(p.H) * p.q * 3 * K * K, [&](int b) { cpu_request(p, b, err); });
}

void cpu_commit(const CommitParams& p, uint32_t* flags, int32_t* index) {
  std::mutex mu;
  const ErrorSink err{flags, index, &mu};
  parallel_for(p.B, int64_t(p.H) * p.Qr * 2 * K * K, [&](int b) {
    const CommitPlan c = resolve_commit(p, b);
    if (c.kind == RequestKind::kError) err.raise(c.flags, b);
    if (c.kind != RequestKind::kRun) return;
    if (c.count > 0) {
      std::vector<float> S(K * K);
      for (int h = 0; h < p.H; ++h) {
        state_load(p.state, p.state_bf16, p.state_slot_stride, c.slot, h, S.data());
        fold_records(S.data(), p.correction, p.correction_row, p.key_gate, p.key_gate_row, p.Qr, c.row, h, c.count);
        state_store(p.state, p.state_bf16, p.state_slot_stride, c.slot, h, S.data());
      }
    }
    if (!p.counts) p.pending[c.row * p.pending_stride] = 0;
  });
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kda
