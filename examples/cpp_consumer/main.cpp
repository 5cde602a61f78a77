// examples/cpp_consumer/main.cpp — one decode step of a small KDA layer through the
// installed C++ API (kda/prepared.h), on the CPU backend: what a C++ server does per layer.
// Prints the plan and the status; exits 0 when the step ran and flagged nothing.
#include <cstdio>
#include <vector>

#include "kda/prepared.h"

int main() {
  constexpr int H = 1, D = H * kda::kHeadDim, W = 4, B = 2, SLOTS = 4, WINDOW = W - 1;
  constexpr int K = kda::kHeadDim, R = kda::kRank;
  using kda::DType;
  using kda::make_view;

  // Weights: a small, well-defined layer (not a trained one).
  std::vector<float> conv_w(3 * D * W, 0.25f), a_log(H, 0.5f), dt_bias(D, 0.f), norm_w(K, 1.f);
  std::vector<uint16_t> f_b(size_t(D) * R, 0x3c00);  // bf16 0.0078125
  kda::LayerWeights w;
  w.conv_weight = make_view(conv_w.data(), DType::kF32, {3 * D, 1, W});
  w.A_log = make_view(a_log.data(), DType::kF32, {H});
  w.dt_bias = make_view(dt_bias.data(), DType::kF32, {D});
  w.norm_weight = make_view(norm_w.data(), DType::kF32, {K});
  w.f_b_weight = make_view(f_b.data(), DType::kBF16, {D, R});
  w.lower_bound = -5.0f;

  // Caches: SD conv windows [slots, window, 3D] (vLLM's layout) and fp32 state.
  std::vector<uint16_t> conv(size_t(SLOTS) * WINDOW * 3 * D, 0);
  std::vector<float> state(size_t(SLOTS) * H * K * K, 0.f);
  kda::Caches caches;
  caches.conv_state = make_view(conv.data(), DType::kBF16, {SLOTS, WINDOW, 3 * D});
  caches.state = make_view(state.data(), DType::kF32, {SLOTS, H, K, K});

  // One packed projection row per request: qkv · out_gate · f_a · beta, bf16 1.0 everywhere.
  const int64_t pitch = 4 * D + R + H;
  std::vector<uint16_t> projected(size_t(B) * pitch, 0x3f80), out(size_t(B) * D, 0);
  std::vector<int32_t> slots = {1, 2};

  try {
    kda::PreparedKda layer(w, {{{kda::StepMode::kDecode, B, 1}, kda::Policy{}}}, /*conv_dim_first=*/false);
    layer.prepare(caches);
    std::printf("plan: %s\n", layer.plan_for({kda::StepMode::kDecode, B, 1}, caches).describe().c_str());
    kda::StepArgs args;
    args.slots = make_view(slots.data(), DType::kI32, {B});
    layer.run(make_view(projected.data(), DType::kBF16, {B, pitch}), make_view(out.data(), DType::kBF16, {B, D}),
              caches, args);
    const kda::Status st = layer.status();
    std::printf("status: %s, out[0] = 0x%04x\n", st.describe().c_str(), out[0]);
    return st.ok() ? 0 : 1;
  } catch (const kda::Error& e) {
    std::printf("kda::Error (operand %s): %s\n", e.operand().c_str(), e.what());
    return 2;
  }
}
