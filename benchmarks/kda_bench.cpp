// benchmarks/kda_bench.cpp — times kda-decode steps by the protocol of BENCHMARKS.md:
//   1. ceiling in the same run: 1 GiB device-to-device copy, median of 15, 2·bytes/time;
//   2. floor = the bytes the step must move once / ceiling;
//   3. cold caches: one CUDA graph of N steps, each with B distinct slots (disjoint across
//      steps) and its own input/output buffers, N = max(4, min(64, ⌈400e6 / (B·H·65536)⌉)),
//      a pool of B·N + 1 slots;
//   4. warm-up, then 15 timed replays (CUDA events); per-step time = median / N;
//   5. report µs, floor, time/floor and GB/s.
//
// Usage: kda_bench [--H 12,32,96] [--B 1,8,64,256] [--mode decode|append|per_token|record|fused]
//                  [--qr 4,8,16] (append: records per row; whole cycles of Qr steps timed)
//                  [--q 1] [--variant auto|split|wide|ws] [--state f32|bf16|f32,bf16] [--gate 0|1|2|auto]
//                  [--layout ds|sd] [--narrow auto|on|off] [--peer FILE] [--csv FILE] [--dump-out PREFIX]
//                  [--sms N] [--stagger on|off]
//   --narrow    the policy's CTA form for Wide's bf16 q = 1 decode / per_token steps (Policy::narrow); the
//               variant column then ends in "n" where the plan runs the narrow form
//   --gate      the policy's gate mode (SPEC §5; default 0): 0 per item, 1 shared (the gate
//               kernel's GEMM, then the step), auto the planner's choice; the CSV's gate column
//               is the request, gate_plan what the plan runs
//   --gate 2    gate mode 2 (the raw gate F_B·f_a precomputed, D wide; no F_B read), the
//               inputs of vLLM's fused K3 kernel; floors per BENCHMARKS.md
//   --peer FILE a CSV with columns H,B,us (e.g. docs/data/vllm_k3_decode_h200.csv): its
//               figure and our ratio are printed beside each decode point it has. The card
//               the figures come from is a `# device: NAME` line of the file, else the file
//               name's last `_` token (h200); on another card the run says so first, since
//               the ratio then compares two cards
//   --sms N     the steps on N of the device's SMs (a green context: cuDevSmResourceSplitByCount, which rounds N up
//               to the architecture's granularity, 8 on sm_90; the line `# green context` says how many): a card with
//               more DRAM bandwidth per SM, e.g. an H100 (3.35 TB/s) on 88 SMs has the H200's 36-38 GB/s per SM. The
//               copy ceiling and so the floor stay the whole device's; the planner still plans for all SMs, so
//               grids below about ten waves run otherwise than on such a card
//   --stagger   append: the rows start at staggered cycle positions (request b of a group with pending = 1 + b mod Qr,
//               as requests that joined at different steps) instead of all full, so that each step folds a mix of
//               pending counts and writes back 1 / Qr of the checkpoints; the same bytes per cycle (mode append+s)
//   --dump-out  after each point, the last replay's outputs (steps × rows × D bf16, the graph's
//               steps in order) written raw to PREFIX_<mode>_<state>_H<H>_B<B>.bin: for builds whose
//               kernels write a probe into the outputs (KDA_TIMELINE, benchmarks/ladder/timeline.py)
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_cuda.h"
#include "kda/cuda/config.h"
#include "kda/numerics.h"
#include "kda/prepared.h"

namespace {

using namespace kda;
constexpr int K = 128, W = 4;

/// The items of a comma-separated list.
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string tok;
  while (std::getline(ss, tok, ',')) v.push_back(tok);
  return v;
}

/// Whether the device named `device` (cudaDeviceProp::name, "NVIDIA H100 80GB HBM3") is the card a
/// peer's figures name ("H200", "h200", "NVIDIA H200"): case-insensitive containment either way.
bool same_card(const std::string& device, const std::string& card) {
  auto upper = [](std::string t) {
    for (char& c : t) c = char(std::toupper(static_cast<unsigned char>(c)));
    return t;
  };
  const std::string d = upper(device), c = upper(card);
  return !c.empty() && (d.find(c) != std::string::npos || c.find(d) != std::string::npos);
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  for (const std::string& tok : split_list(s)) v.push_back(std::stoi(tok));
  return v;
}

/// Frees every device allocation made through dalloc when it goes out of scope (also when
/// a configuration throws, so a refused configuration leaks nothing).
struct DeviceArena {
  std::vector<void*> ptrs;
  ~DeviceArena() {
    for (void* p : ptrs) cudaFree(p);
  }
};
DeviceArena* g_arena = nullptr;
void* dalloc(size_t bytes) {
  void* p = nullptr;
  CK(cudaMalloc(&p, bytes));
  if (g_arena) g_arena->ptrs.push_back(p);
  return p;
}

void* dmalloc_random_bf16(size_t n, std::mt19937& rng, float scale) {
  std::vector<uint16_t> h(n);
  std::normal_distribution<float> d(0.f, scale);
  for (auto& x : h) x = f32_to_bf16(d(rng));
  void* p = dalloc(n * 2);
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
  return p;
}
void* dmalloc_random_f32(size_t n, std::mt19937& rng, float scale, float shift = 0.f) {
  std::vector<float> h(n);
  std::normal_distribution<float> d(0.f, scale);
  for (auto& x : h) x = shift + d(rng);
  void* p = dalloc(n * 4);
  CK(cudaMemcpy(p, h.data(), n * 4, cudaMemcpyHostToDevice));
  return p;
}
/// Fills device memory with small random values with a kernel-free method: chunks copied
/// from one random host block (values need not be independent, only not zero).
void fill_device(void* p, size_t bytes, std::mt19937& rng, bool f32, float scale = 0.05f) {
  const size_t chunk = std::min(size_t(1) << 22, (bytes + 15) / 16 * 16);
  std::vector<unsigned char> h(chunk);
  std::normal_distribution<float> d(0.f, scale);
  if (f32)
    for (size_t i = 0; i < chunk / 4; ++i) reinterpret_cast<float*>(h.data())[i] = d(rng);
  else
    for (size_t i = 0; i < chunk / 2; ++i) reinterpret_cast<uint16_t*>(h.data())[i] = f32_to_bf16(d(rng));
  // one random chunk from the host, then doubling device-to-device copies
  const size_t first = std::min(chunk, bytes);
  CK(cudaMemcpy(p, h.data(), first, cudaMemcpyHostToDevice));
  for (size_t done = first; done < bytes;) {
    const size_t n = std::min(done, bytes - done);
    CK(cudaMemcpy(static_cast<char*>(p) + done, p, n, cudaMemcpyDeviceToDevice));
    done += n;
  }
}

std::string g_dump_out;                   // --dump-out PREFIX
NarrowForm g_narrow = NarrowForm::kAuto;  // --narrow
bool g_stagger = false;                   // --stagger

struct Result {
  double us, floor_us, gbs;
  const char* variant;
  int split;
  int gate_plan = 0;    // the gate mode the plan runs
  bool narrow = false;  // the plan runs the narrow form (128-thread CTAs)
};

/// Bytes a step must move once (BENCHMARKS.md §2).
double floor_bytes(StepMode mode, int H, int B, int q, int pending, bool bf16_state, bool gate2, int Qr = 1) {
  const double items = double(H) * B;
  const double tile = K * K * (bf16_state ? 2.0 : 4.0);
  const double rec = (K + 2 * K) * 4.0;  // u, k, g per token per item
  double state = 0;
  switch (mode) {
    case StepMode::kDecode: state = 2 * tile; break;
    case StepMode::kPerToken: state = tile * (1 + q); break;
    case StepMode::kRecord: state = tile + rec * q; break;
    case StepMode::kFused: state = tile + (pending > 0 ? tile + rec * pending : 0) + rec * q; break;
    // append, averaged over a cycle of Qr steps from a full row: every step reads the
    // checkpoint and writes one record; the first folds Qr records and writes the checkpoint
    // back, step j of the rest folds j records: (Qr + 1) / 2 records read per step
    case StepMode::kAppend: state = tile + tile / Qr + rec * (1 + (Qr + 1) / 2.0); break;
  }
  const double conv = 3.0 * K * ((W - 1) + (W - 2 + q)) * 2;                 // read W-1 columns, write W-2+q
  const double rows = q * (4.0 * K * 2 + 2 + K * 2);                         // q,k,v,out_gate, beta, out
  const double per_req = q * (gate2 ? double(H) * K : double(kRank)) * 2.0;  // gate input
  const double weights = H * ((gate2 ? 0.0 : double(K) * kRank * 2) + 3.0 * W * K * 4);
  return items * (state + conv + rows) + B * per_req + weights;
}

Result bench_one(StepMode mode, int H, int B, int q, Variant variant, bool bf16_state, int gate, bool sd,
                 double ceiling, int qr = 8) {
  const bool gate2 = gate == 2;
  const int D = H * K;
  const int N = std::max(4, std::min(64, int(std::ceil(400e6 / (double(B) * H * 65536)))));
  // append: N groups of B slots, each through a whole cycle of Qr steps; the steps of a cycle
  // are N steps apart in the graph (group 0 … N−1 at cycle position 0, then 1, …), so every
  // step still meets cold caches
  const bool append = mode == StepMode::kAppend;
  const int steps = append ? N * qr : N;
  // per-token steps write q slots per request: the pool holds B·q·N + 1 slots for them
  const int per_req = mode == StepMode::kPerToken ? q : 1;
  const int P = B * N * per_req + 1;
  const int window = W - 2 + q;
  const int rows = B * q;
  // rows padded to 16 bytes, as engines allocate them (WS needs 16-byte aligned rows and
  // falls back to Wide otherwise)
  const int pitch = (4 * D + (gate2 ? D : kRank) + H + 7) / 8 * 8;
  const int Qr = append ? qr : q;
  // fused folds pending = q records; an append cycle starts from a full row (pending = Qr),
  // where the previous cycle left it
  const int pending_n = mode == StepMode::kFused ? q : append ? Qr : 0;
  std::mt19937 rng(7);
  DeviceArena arena;
  g_arena = &arena;
  struct ArenaReset {
    ~ArenaReset() { g_arena = nullptr; }
  } arena_reset;

  // ---- weights ------------------------------------------------------------------------------
  void* conv_w = dmalloc_random_f32(size_t(3 * D) * W, rng, 0.4f);
  void* f_b = dmalloc_random_bf16(size_t(D) * kRank, rng, 0.08f);
  void* A_log = dmalloc_random_f32(H, rng, 0.5f);
  void* dt_bias = dmalloc_random_f32(D, rng, 0.5f);
  void* norm_w = dmalloc_random_f32(K, rng, 0.2f, 1.0f);
  LayerWeights w;
  w.conv_weight = make_view(conv_w, DType::kF32, {3 * D, 1, W}, Device::kCUDA);
  w.f_b_weight = make_view(f_b, DType::kBF16, {D, kRank}, Device::kCUDA);
  w.A_log = make_view(A_log, DType::kF32, {H}, Device::kCUDA);
  w.dt_bias = make_view(dt_bias, DType::kF32, {D}, Device::kCUDA);
  w.norm_weight = make_view(norm_w, DType::kF32, {K}, Device::kCUDA);
  w.lower_bound = -5.0f;

  // ---- caches and per-step buffers ------------------------------------------------------------
  const size_t st_bytes = size_t(P) * H * K * K * (bf16_state ? 2 : 4);
  const size_t cv_bytes = size_t(P) * 3 * D * window * 2;
  void *corr = nullptr, *kg = nullptr, *pend = nullptr, *pend0 = nullptr;
  void* state = dalloc(st_bytes);
  void* conv = dalloc(cv_bytes);
  fill_device(state, st_bytes, rng, !bf16_state);
  fill_device(conv, cv_bytes, rng, false);
  Caches caches;
  caches.conv_state = sd ? make_view(conv, DType::kBF16, {P, window, 3 * D}, Device::kCUDA)
                         : make_view(conv, DType::kBF16, {P, 3 * D, window}, Device::kCUDA);
  caches.state = make_view(state, bf16_state ? DType::kBF16 : DType::kF32, {P, H, K, K}, Device::kCUDA);
  const bool records = mode == StepMode::kRecord || mode == StepMode::kFused || append;
  if (records) {
    const size_t rc = size_t(P) * H * Qr * K * 4, rk = rc * 2;
    corr = dalloc(rc);
    kg = dalloc(rk);
    fill_device(corr, rc, rng, true);
    fill_device(kg, rk, rng, true);  // gates ~N(0, .05): decays near 1, fine for timing
    caches.correction = make_view(corr, DType::kF32, {P, H, Qr, K}, Device::kCUDA);
    caches.key_gate = make_view(kg, DType::kF32, {P, H, Qr, 2 * K}, Device::kCUDA);
    pend = dalloc(P * 4);
    pend0 = dalloc(P * 4);
    caches.pending = make_view(pend, DType::kI32, {P}, Device::kCUDA);
  }
  // inputs: one random block of 16 MiB repeated (values need not be independent across rows,
  // only realistic in magnitude: N(0, 1) projections)
  void* proj = dalloc(size_t(steps) * rows * pitch * 2);
  fill_device(proj, size_t(steps) * rows * pitch * 2, rng, false, 1.0f);
  void* out = dalloc(size_t(steps) * rows * D * 2);
  // slots: a random permutation of 1..P-1, B·(q or 1) per step, disjoint across steps
  // (per-token: start slot = column 0, accepted = 1)
  std::vector<int> perm(P - 1);
  for (int i = 0; i < P - 1; ++i) perm[i] = i + 1;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int> sl(perm.begin(), perm.end());
  void* slots = dalloc(sl.size() * 4);
  CK(cudaMemcpy(slots, sl.data(), sl.size() * 4, cudaMemcpyHostToDevice));
  if (pend) {  // each row's pending count at the start of every replay (the graph's first copy)
    std::vector<int> ph(P, pending_n);
    ph[0] = 0;
    if (append && g_stagger)  // group g's request b holds slot sl[g·B + b]
      for (int i = 0; i < P - 1; ++i) ph[sl[i]] = 1 + (i % B) % Qr;
    CK(cudaMemcpy(pend0, ph.data(), P * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pend, ph.data(), P * 4, cudaMemcpyHostToDevice));
  }
  // fused steps fold pending = q records: pending must equal accepted (SPEC §4)
  void* acc = nullptr;
  if (mode == StepMode::kFused) {
    std::vector<int> ah(B, q);
    acc = dalloc(B * 4);
    CK(cudaMemcpy(acc, ah.data(), B * 4, cudaMemcpyHostToDevice));
  }

  Policy pol;
  pol.variant = variant;
  pol.gate_mode = gate < 0 ? GateMode::kAuto : GateMode(gate);
  pol.narrow = g_narrow;
  PreparedKda kda(w, {{StepKey{mode, B, q}, pol}}, /*conv_dim_first=*/!sd, 0);
  kda.prepare(caches);
  const Plan& plan = kda.plan_for(StepKey{mode, B, q}, caches);

  cudaStream_t s = make_stream();
  auto enqueue = [&] {
    if (pend) CK(cudaMemcpyAsync(pend, pend0, P * 4, cudaMemcpyDeviceToDevice, s));
    for (int i = 0; i < steps; ++i) {
      StepArgs a;
      a.q = q;
      a.mode = mode;
      a.stream = s;
      if (acc) a.accepted = make_view(acc, DType::kI32, {B}, Device::kCUDA);
      const int group = i % N;  // decode / verify: step i uses group i; append: cycle position i / N
      int32_t* sp = static_cast<int32_t*>(slots) + size_t(group) * B * per_req;
      a.slots = mode == StepMode::kPerToken ? make_view(sp, DType::kI32, {B, q}, Device::kCUDA)
                                            : make_view(sp, DType::kI32, {B}, Device::kCUDA);
      TensorView pv = make_view(static_cast<uint16_t*>(proj) + size_t(i) * rows * pitch, DType::kBF16, {rows, pitch},
                                Device::kCUDA);
      TensorView ov =
          make_view(static_cast<uint16_t*>(out) + size_t(i) * rows * D, DType::kBF16, {rows, D}, Device::kCUDA);
      kda.run(pv, ov, caches, a);
    }
  };
  const float ms = graph_replay_ms(s, enqueue);
  if (!g_dump_out.empty()) {
    std::vector<char> host(size_t(steps) * rows * D * 2);
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(host.data(), out, host.size(), cudaMemcpyDeviceToHost));
    const std::string name = g_dump_out + "_" + mode_name(mode) + "_" + (bf16_state ? "bf16" : "f32") + "_H" +
                             std::to_string(H) + "_B" + std::to_string(B) + ".bin";
    FILE* df = std::fopen(name.c_str(), "wb");
    if (!df || std::fwrite(host.data(), 1, host.size(), df) != host.size()) {
      std::fprintf(stderr, "--dump-out: cannot write %s\n", name.c_str());
      std::exit(1);
    }
    std::fclose(df);
  }
  const Status st = kda.status(s);
  if (!st.ok()) std::fprintf(stderr, "warning: status %s\n", st.describe().c_str());
  const double us = ms * 1e3 / steps;
  const double bytes = floor_bytes(mode, H, B, q, pending_n, bf16_state, gate2, Qr);
  Result r{us,
           bytes / ceiling * 1e6,
           bytes / (us * 1e-6) / 1e9,
           variant_name(plan.variant),
           plan.split,
           int(plan.gate_mode),
           plan.threads == kda::cuda_config::kNarrowThreads};
  cudaStreamDestroy(s);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> Hs = {12, 32, 96}, Bs = {1, 8, 64, 256};
  std::vector<int> qs = {1}, qrs = {8};
  std::string mode_s = "decode", variant_s = "auto", state_s = "f32", csv, peer_file, peer_device, layout_s = "ds";
  int gate = 0, sms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--H")
      Hs = parse_list(v);
    else if (k == "--B")
      Bs = parse_list(v);
    else if (k == "--q")
      qs = parse_list(v);
    else if (k == "--qr")
      qrs = parse_list(v);
    else if (k == "--mode")
      mode_s = v;
    else if (k == "--variant")
      variant_s = v;
    else if (k == "--state")
      state_s = v;
    else if (k == "--csv")
      csv = v;
    else if (k == "--gate")
      gate = v == "auto" || v == "a" ? -1 : std::stoi(v);
    else if (k == "--layout")
      layout_s = v;
    else if (k == "--peer")
      peer_file = v;
    else if (k == "--dump-out")
      g_dump_out = v;
    else if (k == "--narrow")
      g_narrow = parse_narrow_form(v);
    else if (k == "--sms")
      sms = std::stoi(v);
    else if (k == "--stagger") {
      if (v != "on" && v != "off") {
        std::fprintf(stderr, "--stagger: expected on or off, got '%s'\n", v.c_str());
        return 2;
      }
      g_stagger = v == "on";
    } else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  const std::vector<std::string> modes = split_list(mode_s), variants = split_list(variant_s),
                                 states = split_list(state_s);
  for (const std::string& st : states)
    if (st != "f32" && st != "bf16") {
      std::fprintf(stderr, "--state: expected f32, bf16 or a comma list of them, got %s\n", st.c_str());
      return 2;
    }
  if (gate < -1 || gate > 2) {
    std::fprintf(stderr, "--gate: expected 0, 1, 2 or auto, got %d\n", gate);
    return 2;
  }
  // the peer's decode figures, keyed by (H, B)
  std::vector<std::array<double, 3>> peer;
  if (!peer_file.empty()) {
    FILE* pf = std::fopen(peer_file.c_str(), "r");
    if (!pf) {
      std::fprintf(stderr, "--peer: cannot open %s\n", peer_file.c_str());
      return 2;
    }
    char line[512];
    while (std::fgets(line, sizeof line, pf)) {
      int ph, pb;
      double pus;
      if (std::strncmp(line, "# device:", 9) == 0) {
        peer_device = line + 9;
        peer_device.erase(0, peer_device.find_first_not_of(" \t"));
        peer_device.erase(peer_device.find_last_not_of(" \t\r\n") + 1);
      } else if (line[0] != '#' && std::sscanf(line, "%d,%d,%lf", &ph, &pb, &pus) == 3) {
        peer.push_back({double(ph), double(pb), pus});
      }
    }
    std::fclose(pf);
    if (peer_device.empty()) {  // docs/data/vllm_k3_decode_h200.csv: "h200"
      std::string base = peer_file.substr(peer_file.find_last_of('/') + 1);
      base = base.substr(0, base.rfind('.'));
      peer_device = base.substr(base.find_last_of('_') + 1);
    }
  }
  auto peer_us = [&](int H, int B) {
    for (const auto& e : peer)
      if (int(e[0]) == H && int(e[1]) == B) return e[2];
    return 0.0;
  };
  const double ceiling = copy_ceiling();
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  // (the memory clock and bus width the planner's DRAM bandwidth comes from: DeviceInfo::dram_gbps)
  int mem_khz = 0, bus_bits = 0;
  CK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0));
  CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
  std::printf(
      "# %s, %d SMs; copy ceiling %.0f GB/s (1 GiB D2D, median of 15, read+write); memory clock %d MHz, "
      "bus %d bits\n",
      prop.name, prop.multiProcessorCount, ceiling / 1e9, mem_khz / 1000, bus_bits);
  if (!peer.empty() && !same_card(prop.name, peer_device)) {
    std::printf("# the peer's figures were measured on %s, this run is on %s: ours/p compares two cards\n",
                peer_device.c_str(), prop.name);
    std::fprintf(stderr, "kda_bench: --peer figures are from %s, this GPU is %s\n", peer_device.c_str(), prop.name);
  }
  FILE* f = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (sms != 0)
    std::printf("# green context: the steps on %d of the %d SMs (--sms %d); ceiling and floor the whole device's\n",
                use_sm_partition(sms), prop.multiProcessorCount, sms);
  if (f)
    std::fprintf(f,
                 "mode,q,H,B,variant_req,variant,split,state,gate,layout,qr,us,floor_us,ratio,GBs,pct_ceiling,peer_us,"
                 "vs_peer,gate_plan\n");
  std::printf("%-9s %2s %3s %4s %-5s %1s %-2s %-12s %9s %9s %6s %7s %6s %9s %6s\n", "mode", "q", "H", "B", "state", "g",
              "ly", "variant", "us", "floor_us", "x", "GB/s", "%ceil", "peer_us", "ours/p");
  for (const auto& state : states)
    for (const auto& ms : modes) {
      const StepMode m = parse_mode(ms);
      // append: the --qr list in place of --q (q = 1)
      const std::vector<int>& loop = m == StepMode::kAppend ? qrs : qs;
      for (int qv : loop)
        for (int H : Hs)
          for (int B : Bs)
            for (const auto& vs : variants) {
              const int q = m == StepMode::kAppend ? 1 : qv, qr = m == StepMode::kAppend ? qv : 0;
              if (m == StepMode::kDecode && q != 1) continue;
              Result r;
              try {
                r = bench_one(m, H, B, q, parse_variant(vs), state == "bf16", gate, layout_s == "sd", ceiling,
                              qr > 0 ? qr : 8);
              } catch (const std::exception& e) {
                std::printf("%-9s %2d %3d %4d %-7s %-12s skipped: %s\n", ms.c_str(), q, H, B, state.c_str(), vs.c_str(),
                            e.what());
                continue;
              }
              char vname[32];
              std::snprintf(vname, sizeof vname, "%s/%d%s%s", r.variant, r.split, r.narrow ? "n" : "",
                            r.gate_plan == 1 ? "+g1" : "");
              const std::string greq = gate < 0 ? "auto" : std::to_string(gate);
              char mname[24];
              // (staggered append rows: mode append+s)
              const std::string mlabel = qr > 0 && g_stagger ? ms + "+s" : ms;
              std::snprintf(mname, sizeof mname, qr > 0 ? "%s/%d" : "%s", mlabel.c_str(), qr);
              // the peer's decode figure beside decode and append points
              const double pu = m == StepMode::kDecode || m == StepMode::kAppend ? peer_us(H, B) : 0.0;
              std::printf("%-9s %2d %3d %4d %-5s %1s %-2s %-12s %9.2f %9.2f %6.2f %7.0f %5.1f%%", mname, q, H, B,
                          state.c_str(), gate < 0 ? "a" : greq.c_str(), layout_s.c_str(), vname, r.us, r.floor_us,
                          r.us / r.floor_us, r.gbs, 100.0 * r.gbs * 1e9 / ceiling);
              if (pu > 0) std::printf(" %9.2f %6.3f", pu, r.us / pu);
              std::printf("\n");
              if (f)
                std::fprintf(f, "%s,%d,%d,%d,%s,%s,%d,%s,%s,%s,%d,%.3f,%.3f,%.4f,%.1f,%.2f,%.3f,%.4f,%d\n",
                             mlabel.c_str(), q, H, B, vs.c_str(), r.variant, r.split, state.c_str(), greq.c_str(),
                             layout_s.c_str(), qr, r.us, r.floor_us, r.us / r.floor_us, r.gbs,
                             100.0 * r.gbs * 1e9 / ceiling, pu, pu > 0 ? r.us / pu : 0.0, r.gate_plan);
              std::fflush(stdout);
            }
    }
  if (f) std::fclose(f);
  return 0;
}
