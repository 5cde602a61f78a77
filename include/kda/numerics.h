// kda/numerics.h — scalar functions shared by the CPU backend and the CUDA kernels, so that
// both evaluate SPEC §3 with the same formulas (fp32 throughout; on the device e^x and 1/sqrt
// by the hardware's approximations, see the NOTES at exp_).
//
// Sources: the gate and the l2 norm follow flash-linear-attention (fla/ops/kda: gate
// `-exp(A_log)·softplus(z + dt_bias)`, lower-bound form `lower_bound·sigmoid(exp(A_log)·z)`,
// l2norm `x / sqrt(Σx² + 1e-6)`); the gated RMSNorm is fla's FusedRMSNormGated with a
// sigmoid gate (Kimi Linear / vLLM KimiDeltaAttention).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KDA_HD __host__ __device__ __forceinline__
#else
#define KDA_HD inline
#endif

namespace kda {

/// Softplus threshold: softplus(z) = z for z > 20 (fla, PyTorch).
inline constexpr float kSoftplusThreshold = 20.0f;
/// The l2-norm epsilon of q and k (fla `l2norm_fwd`, eps = 1e-6 inside the sqrt).
inline constexpr float kL2Eps = 1e-6f;
/// q scale 128^-0.5.
inline constexpr float kQScale = 0.08838834764831845f;

KDA_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

KDA_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

/// bf16 bit pattern -> fp32 (exact).
KDA_HD float bf16_to_f32(uint16_t b) { return bits_float(uint32_t(b) << 16); }

/// fp32 -> bf16 bit pattern, round to nearest even, in integer arithmetic; NaN stays NaN
/// (quiet, payload kept). The host form of f32_to_bf16 and its reference on the device.
KDA_HD uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

/// fp32 -> bf16 bit pattern, round to nearest even; NaN stays NaN (quiet).
/// NOTES: on the device one `cvt.rn.bf16.f32` (the hardware's IEEE round to nearest even):
/// the same bits as f32_to_bf16_bits for every non-NaN input (checked over all 2^32 inputs
/// on the GPU, CudaNumerics.Bf16ConversionMatchesTheIntegerFormEverywhere); a NaN becomes the
/// canonical quiet NaN 0x7fff instead of keeping its payload. The integer form costs about
/// eight instructions a value: a quarter of the bf16-state step kernel's instructions were
/// its state stores.
KDA_HD uint16_t f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  uint16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
#else
  return f32_to_bf16_bits(f);
#endif
}

/// Two values to a packed bf16 pair: `lo` in bits 0–15, `hi` in bits 16–31 (each as
/// f32_to_bf16; on the device one `cvt.rn.bf16x2.f32` for both).
KDA_HD uint32_t f32x2_to_bf16x2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return uint32_t(f32_to_bf16(lo)) | (uint32_t(f32_to_bf16(hi)) << 16);
#endif
}

/// fp32 rounded through bf16 (what a bf16 store then load gives).
KDA_HD float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

/// NOTES: the device's special functions. IEEE `expf` is a range reduction, `ex2.approx` and a
/// fix-up (about a dozen instructions), `1 / sqrtf` an IEEE square root and division (about
/// twenty with their slow paths); the step runs them per conv channel (the SiLU), per gate row,
/// per lane and warp (the decays of the lane's columns) and per thread (the token norms), many
/// on the item's path to its first row. With KDA_FAST_INTRINSICS (the default) the device takes
/// the hardware's approximations, `__expf` (2 + ⌊1.173·|x|⌋ ulp) and `rsqrtf` (2 ulp), far
/// inside SPEC §8's tolerances (CudaNumerics.SpecialFunctionsWithinTheirBounds); the host keeps
/// the IEEE forms. The device's bitwise identities (commit, fused, append) hold either way:
/// every kernel evaluates these through the same functions. (The sigmoid's division stays IEEE:
/// with `rcp.approx` the q = 1 kernels spilled and grids from 768 items ran 2.5–6% slower,
/// docs/PERFORMANCE.md, "The device's special functions". The verify kernels' small-grid form
/// (Split at q ≥ 2, Wide's two-CTA kernels), which has the registers for it, takes `rcp.approx`
/// through the APPROX forms below: StepTraits::kApproxRcp. SPEC §8's device identities compare
/// steps of one batch, so one kernel with itself.)
#ifndef KDA_FAST_INTRINSICS
#define KDA_FAST_INTRINSICS 1
#endif

/// e^x.
KDA_HD float exp_(float x) {
#if defined(__CUDA_ARCH__) && KDA_FAST_INTRINSICS
  return __expf(x);
#else
  return expf(x);
#endif
}

/// 1 / sqrt(x) for x > 0 (the l2 and RMS norms).
KDA_HD float inv_sqrt_(float x) {
#if defined(__CUDA_ARCH__) && KDA_FAST_INTRINSICS
  return rsqrtf(x);
#else
  return 1.0f / sqrtf(x);
#endif
}

/// 1 / x: IEEE, or with APPROX on the device `rcp.approx.ftz` (1 ulp).
template <bool APPROX = false>
KDA_HD float recip_(float x) {
#if defined(__CUDA_ARCH__)
  if constexpr (APPROX) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
  }
#endif
  return 1.0f / x;
}

template <bool APPROX = false>
KDA_HD float sigmoidf_(float x) {
  return recip_<APPROX>(1.0f + exp_(-x));
}

KDA_HD float softplusf_(float z) { return z > kSoftplusThreshold ? z : log1pf(expf(z)); }

/// Activated gate g (SPEC §3): z already includes dt_bias; a = exp(A_log[h]).
///   softplus gate:    g = -a · softplus(z)
///   lower-bound gate: g = lower_bound · sigmoid(a · z)
template <bool APPROX = false>
KDA_HD float activate_gate(float z, float a, bool has_lower_bound, float lower_bound) {
  return has_lower_bound ? lower_bound * sigmoidf_<APPROX>(a * z) : -a * softplusf_(z);
}

/// Decay factor e = exp(g). Record-mode verify, commit and the fused fold all use this one
/// function so that commit(n) reproduces the per-token state bitwise (SPEC §4, §8).
KDA_HD float decay_of(float g) { return exp_(g); }

/// SiLU of the conv output.
template <bool APPROX = false>
KDA_HD float silu(float a) {
  return a * sigmoidf_<APPROX>(a);
}

}  // namespace kda
