// kda/cuda/common.cuh — device helpers shared by the step and commit kernels: warp sums,
// state tile loads/stores (fp32 or bf16 state), cache-window access, error reporting.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cuda/annotated_ptr>
#include <cuda/atomic>
#include <cuda/ptx>

#include "kda/numerics.h"
#include "kda/params.h"
#include "kda/types.h"

namespace kda::cuda {

/// Sum over the 32 lanes of a warp (butterfly: every lane gets the total; fixed order, so
/// the result is the same bits run to run).
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Sum over aligned groups of G consecutive lanes (G a power of two ≤ 32).
template <int G>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  float d = a.x * b.x;
  d = fmaf(a.y, b.y, d);
  d = fmaf(a.z, b.z, d);
  d = fmaf(a.w, b.w, d);
  return d;
}

// ---- state tiles: 4 consecutive K values of one V row ------------------------------------
// NOTES: the state is read once and written once per step: streaming cache hints (.cs) keep
// it from evicting the weights and the operands that are reused from L2.
template <class StateT>
struct StateIO;

template <>
struct StateIO<float> {
  __device__ __forceinline__ static float4 load(const float* p) { return __ldcs(reinterpret_cast<const float4*>(p)); }
  __device__ __forceinline__ static void store(float* p, const float4& v) { __stcs(reinterpret_cast<float4*>(p), v); }
  /// What a store followed by a load gives (identity for fp32).
  __device__ __forceinline__ static float4 stored(const float4& v) { return v; }
};

/// bf16 state (SPEC §9): every stored copy is bf16_rne of the fp32 running state.
template <>
struct StateIO<uint16_t> {
  __device__ __forceinline__ static float4 load(const uint16_t* p) {
    const uint2 u = __ldcs(reinterpret_cast<const uint2*>(p));
    return make_float4(bits_float(u.x << 16), bits_float(u.x & 0xffff0000u), bits_float(u.y << 16),
                       bits_float(u.y & 0xffff0000u));
  }
  __device__ __forceinline__ static void store(uint16_t* p, const float4& v) {
    __stcs(reinterpret_cast<uint2*>(p), make_uint2(f32x2_to_bf16x2(v.x, v.y), f32x2_to_bf16x2(v.z, v.w)));
  }
  __device__ __forceinline__ static float4 stored(const float4& v) {
    return make_float4(round_bf16(v.x), round_bf16(v.y), round_bf16(v.z), round_bf16(v.w));
  }
};

/// 4 consecutive K values of a state row staged in shared memory (as stored) -> fp32.
__device__ __forceinline__ float4 load_smem_row4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 load_smem_row4(const uint16_t* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  return make_float4(bits_float(u.x << 16), bits_float(u.x & 0xffff0000u), bits_float(u.y << 16),
                     bits_float(u.y & 0xffff0000u));
}

/// fp32 -> 4 consecutive K values of a state row in shared memory, as stored (bf16: the rounding
/// of StateIO<uint16_t>::store).
__device__ __forceinline__ void store_smem_row4(float* p, const float4& v) { *reinterpret_cast<float4*>(p) = v; }
__device__ __forceinline__ void store_smem_row4(uint16_t* p, const float4& v) {
  *reinterpret_cast<uint2*>(p) = make_uint2(f32x2_to_bf16x2(v.x, v.y), f32x2_to_bf16x2(v.z, v.w));
}

/// bar.sync ID, THREADS: the barrier of a subset of the CTA's warps (ID 0 is __syncthreads).
/// Immediate operands: __barrier_sync_count's took two registers, which the 128-register
/// verify kernels spilled.
template <unsigned ID, unsigned THREADS>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(ID > 0 && ID < 16 && THREADS % 32 == 0, "named barrier");
  asm volatile("bar.sync %0, %1;" ::"n"(ID), "n"(THREADS) : "memory");
}

// ---- bulk copies (TMA) and mbarriers -------------------------------------------------------
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!::cuda::ptx::mbarrier_try_wait_parity(bar, parity)) {}
}

/// One bulk copy (TMA) of `bytes` (multiple of 16, both ends 16-byte aligned) from global
/// memory into this CTA's shared memory, completing on `bar`.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  ::cuda::ptx::cp_async_bulk(::cuda::ptx::space_cluster, ::cuda::ptx::space_global, dst, src, bytes, bar);
}
/// The 64-bit L2 cache-policy operand of the `.L2::cache_hint` forms below, from a libcu++ access property over the
/// whole range: `streaming{}` evicts first (data read once), `normal{}` is the default priority, `persisting{}`
/// evicts last. NOTES: the values are those of `createpolicy.fractional.L2::evict_{first,normal,last}.b64 p, 1.0`
/// bit for bit (0x12f00000'00000000, 0x16f00000'00000000, 0x14f00000'00000000 in both forms' sm_90a SASS).
template <class AccessProperty>
__device__ __forceinline__ uint64_t l2_policy(AccessProperty property) {
  return static_cast<uint64_t>(::cuda::access_property(property));
}
/// bulk_g2s with an L2 cache policy (l2_policy). cuda::ptx has no form of cp.async.bulk with .L2::cache_hint.
__device__ __forceinline__ void bulk_g2s_hint(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                              uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
      "l"(src), "r"(bytes), "r"(static_cast<uint32_t>(__cvta_generic_to_shared(bar))), "l"(policy)
      : "memory");
}

/// Gate mode 1: drops an item's logits (its q rows of head h in p.gate_ws, 512 bytes a row) from L2 once the item has
/// read them, so that a line still in L2 is not written back; threads 0 … 4q − 1 each drop one 128-byte line. Only
/// where the gate kernel kept them in L2 (p.gate_ws_keep): beyond that share most have left L2 before the step reads
/// them, and dropping them anyway measured 0.1–0.2% slower (record / fused q = 4, H = 96, B = 256; docs/data/ladder_s63).
/// NOTES: only where one CTA reads the item's logits (Wide, Split 1) and only after it has read them (and, for a pad,
/// after its wait on the gate grid, whose stores they would otherwise precede). Nothing reads them after the step: the
/// next step's gate kernel writes them again after its own wait on this grid. With the gate kernel's evict-last stores
/// (gate_kernel.cuh) the logits then make no DRAM traffic at all where L2 holds them from the gate kernel to the step.
__device__ __forceinline__ void drop_gate_logits(const StepParams& p, int64_t row_base, int h, int q, int tid) {
  // (discard.global.L2 itself: cuda::discard_memory takes any range, and its loop over the lines of an address it
  // cannot prove aligned compiles to a dozen of them; these lines are aligned, rows of whole heads in a cudaMalloc)
  if (p.gate_ws_keep && tid < 4 * q)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(p.gate_ws + (row_base + tid / 4) * p.gate_ws_row + h * kHeadDim +
                                                      (tid % 4) * 32)
                 : "memory");
}

/// Base of the [V, K] state of (slot, head).
template <class StateT>
__device__ __forceinline__ StateT* state_tile(void* base, int64_t slot_stride, int64_t slot, int h) {
  return static_cast<StateT*>(base) + slot * slot_stride + int64_t(h) * kHeadDim * kHeadDim;
}

// ---- conv window ---------------------------------------------------------------------------
__device__ __forceinline__ int64_t conv_offset(const StepParams& p, int64_t slot, int64_t c, int64_t col) {
  return slot * p.conv_slot_stride + c * p.conv_chan_stride + col * p.conv_col_stride;
}
/// kIntegerRound: a bf16 window rounded by f32_to_bf16_bits instead of one cvt (the WS
/// kernel, NOTES in stream_kernel.cuh).
template <bool kIntegerRound = false>
__device__ __forceinline__ void conv_store(const StepParams& p, int64_t slot, int64_t c, int64_t col, float v) {
  const int64_t o = conv_offset(p, slot, c, col);
  if (p.conv_f32)
    static_cast<float*>(p.conv)[o] = v;
  else
    static_cast<uint16_t*>(p.conv)[o] = kIntegerRound ? f32_to_bf16_bits(v) : f32_to_bf16(v);
}

/// One channel's window in one conv slot: the address of column 0 and the column stride in
/// bytes, formed once per channel. NOTES: conv_store forms the whole 64-bit offset per access
/// and, the window dtype being a run-time flag, the compiler issued both dtypes' address
/// arithmetic under predicates (about 210 instructions per warp of the q/k and v channel
/// threads of the q = 1 kernel when every window access went that way; docs/PERFORMANCE.md,
/// "The first wave").
struct ChannelWindow {
  char* col0;
  int64_t stride;
  bool f32;
  __device__ __forceinline__ ChannelWindow(const StepParams& p, int64_t slot, int64_t c) : f32(p.conv_f32 != 0) {
    const int64_t es = f32 ? 4 : 2;
    int64_t base = (slot * p.conv_slot_stride + c * p.conv_chan_stride) * es;
    stride = p.conv_col_stride * es;
    // opaque to the optimiser: otherwise it folds the scale by `es` back into every column's
    // address, the form this struct exists to avoid
    asm("" : "+l"(base), "+l"(stride));
    col0 = static_cast<char*>(p.conv) + base;
  }
  /// The raw bits of columns col, col + 1, col + 2 (one address multiply); value() converts
  /// them, so that a caller can issue every load of its first wave before it uses any.
  __device__ __forceinline__ void raw3(int col, uint32_t (&r)[3]) const {
    const char* a = col0 + col * stride;
#pragma unroll
    for (int j = 0; j < 3; ++j, a += stride)
      r[j] = f32 ? *reinterpret_cast<const uint32_t*>(a) : uint32_t(*reinterpret_cast<const uint16_t*>(a));
  }
  __device__ __forceinline__ float value(uint32_t raw) const { return bits_float(f32 ? raw : raw << 16); }
  __device__ __forceinline__ void load3(int col, float (&w)[3]) const {
    uint32_t r[3];
    raw3(col, r);
#pragma unroll
    for (int j = 0; j < 3; ++j) w[j] = value(r[j]);
  }
  __device__ __forceinline__ void store(int col, float v) const {
    char* a = col0 + col * stride;
    if (f32)
      *reinterpret_cast<float*>(a) = v;
    else
      *reinterpret_cast<uint16_t*>(a) = f32_to_bf16(v);
  }
};

__device__ __forceinline__ float ld_bf16(const uint16_t* p) { return bf16_to_f32(*p); }

/// Raises a caller-error flag (SPEC §4): OR of the flags, min of the request index.
__device__ __forceinline__ void raise_error(uint32_t* flags, int32_t* index, uint32_t f, int b) {
  atomicOr(flags, f);
  atomicMin(index, b);
}

/// Arrival of one of `expected` CTAs on a records row; true for the last one, which then
/// owns the row's pending entry (everyone else has read it) and resets the counter.
/// acq_rel: every earlier read of pending by the arriving CTAs happens before the write.
__device__ __forceinline__ bool arrive_last(int32_t* arrivals, int64_t row, int expected) {
  ::cuda::atomic_ref<int32_t, ::cuda::thread_scope_device> a(arrivals[row]);
  if (a.fetch_add(1, ::cuda::memory_order_acq_rel) == expected - 1) {
    a.store(0, ::cuda::memory_order_relaxed);
    return true;
  }
  return false;
}

// ---- distributed shared memory -------------------------------------------------------------
/// v into element i of `local` in the shared memory of cluster rank `rank` by st.async, the
/// store completing its 4 bytes on that rank's `bar` (32-bit shared::cluster addresses, one
/// mapa each). NOTES: inline PTX, not libcu++'s `cuda::ptx::st_async` on cooperative groups'
/// 64-bit `map_shared_rank` addresses: that form converts each generic address back to a
/// shared one (about 110 more instructions in Split 8 at q = 1) and ran the shared-gate steps
/// 1.2–1.9% slower at one request (H = 12, 24 decode, q = 1 record / fused, append;
/// docs/data/ladder_s30/run1, sta).
__device__ __forceinline__ void store_rank_async(float* local, int i, float v, uint64_t* bar, uint32_t rank) {
  const uint32_t a = uint32_t(__cvta_generic_to_shared(local + i));
  const uint32_t m = uint32_t(__cvta_generic_to_shared(bar));
  uint32_t d, dm;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(dm) : "r"(m), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(d),
               "r"(__float_as_uint(v)), "r"(dm)
               : "memory");
}

}  // namespace kda::cuda
