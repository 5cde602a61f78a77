// benchmarks/ladder/per_token_move.cu — the data movement of a per_token verify step alone:
// each (request, head) item reads its fp32 state tile (64 KiB) once and writes q tiles, one per
// verified token's slot (SPEC §4 per_token), with no KDA arithmetic and no inputs. The issue
// target "per_token ≤ 1.12× its own floor" is out of reach where moving these bytes alone,
// by the fastest structure here, takes longer than 1.12× the step's floor.
//
//   flat/wQ   no per-item structure: eight CTAs per SM walk every item's tile with 16-byte
//             loads (four in flight per thread), each value stored to the Q destination tiles
//   cs/wQ     flat/wQ with streaming stores (st.global.cs: evict-first in L2), as the step
//             kernels store their state
//   +io       the same rung moving the step's other bytes too, as kda_bench's floor counts them
//             (per item: the conv window's W − 1 columns read and W − 2 + Q written, the Q rows of
//             q, k, v, out gate and β read, the Q output rows written), from and to contiguous
//             buffers (the step's are scattered by slot: this only flatters the rung), so its time
//             against kda_bench's per_token floor is the data-movement bound of the whole step
//   tma/wQ    one CTA per item (seven per SM by shared memory): 32-row chunks (16 KiB) by bulk copy into two
//             shared-memory stages, each chunk bulk-copied out to the Q destination tiles
//             (cp.async.bulk shared → global): the per-item pipeline with no register pass
//
// Timing follows BENCHMARKS.md: one CUDA graph of N steps on disjoint random slots (read pool
// and write pool each ≫ 5× L2), 15 replays, median / N, µs per step, GB/s and % of the copy
// ceiling measured in the same run. The floor printed is the state's bytes only ((1 + Q) tiles
// per item); kda_bench's per_token floor adds the step's inputs and outputs (under 1%).
//
// Build: nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude \
//          benchmarks/ladder/per_token_move.cu -o per_token_move
//        (or the CMake target per_token_move: cmake -DKDA_BUILD_BENCHMARKS=ON, ninja per_token_move)
// Run:   ./per_token_move [H B]   (default 96 256); on the device machine, built here and carried:
//        BIN=.gpu/bin STAGES=ladder LADDER="per_token_move 96 256" scripts/gpu_run.sh
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda/ptx>
#include <random>
#include <string>
#include <vector>

#include "../bench_cuda.h"

namespace ptx = ::cuda::ptx;

constexpr int K = 128, kTile = K * K, kThreads = 256, kChunkBytes = 32 * K * 4, kChunks = 4, kStages = 2;

struct Args {
  const float* state;    // read pool: [slots, H, 128, 128]
  const int32_t* slots;  // [B] of this step
  float* dst;            // this step's write region: [items, Q, 128, 128]
  int H, items;
  const float4* io_in;                  // +io: this step's other inputs, [items, io_in_per_item]
  float4* io_out;                       // +io: this step's other outputs, [items, io_out_per_item]
  int io_in_per_item, io_out_per_item;  // in 16-byte pieces
};
/// The step's bytes besides the state per item (benchmarks/kda_bench.cpp floor_bytes, W = 4),
/// in 16-byte pieces, rounded up: read, written.
constexpr int io_in_pieces(int q) { return (3 * K * 3 * 2 + q * (4 * K * 2 + 2) + 15) / 16; }
constexpr int io_out_pieces(int q) { return (3 * K * (2 + q) * 2 + q * K * 2 + 15) / 16; }

template <int Q, bool CS, bool IO>
__global__ void __launch_bounds__(kThreads) flat_kernel(const __grid_constant__ Args a) {
  constexpr int kU = 4;                // 16-byte pieces in flight per thread
  constexpr int64_t kPer = kTile / 4;  // float4 per tile
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  const int64_t total = int64_t(a.items) * kPer, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i0 < total; i0 += kU * stride) {
    float4 v[kU];
    int64_t it[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = i0 + u * stride;
      it[u] = i < total ? i : -1;
      if (i < total) {
        const int item = int(i / kPer);
        v[u] = reinterpret_cast<const float4*>(a.state +
                                               (int64_t(a.slots[item / a.H]) * a.H + item % a.H) * kTile)[i % kPer];
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (it[u] >= 0) {
        const int64_t item = it[u] / kPer;
        float4* d = reinterpret_cast<float4*>(a.dst + item * Q * kTile) + it[u] % kPer;
#pragma unroll
        for (int t = 0; t < Q; ++t) {
          const float s = 1.f - 0.001f * float(t + 1);
          const float4 w = make_float4(v[u].x * s, v[u].y * s, v[u].z * s, v[u].w * s);
          if constexpr (CS)
            __stcs(d + t * kPer, w);
          else
            d[t * kPer] = w;
        }
      }
  }
  if constexpr (IO) {
    const int64_t n_in = int64_t(a.items) * a.io_in_per_item, n_out = int64_t(a.items) * a.io_out_per_item;
    for (int64_t i0 = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n_in; i0 += kU * stride) {
      float4 v[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (i0 + u * stride < n_in) v[u] = a.io_in[i0 + u * stride];
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (i0 + u * stride < n_out) a.io_out[i0 + u * stride] = make_float4(v[u].x * 0.999f, v[u].y, v[u].z, v[u].w);
    }
  }
}

template <int Q>
__global__ void __launch_bounds__(kThreads) tma_kernel(const __grid_constant__ Args a) {
  extern __shared__ __align__(128) unsigned char sm[];
  __shared__ uint64_t full[kStages];
  const int item = blockIdx.x;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) ptx::mbarrier_init(&full[s], 1);
    ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);
  }
  __syncthreads();
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  if (threadIdx.x != 0) return;  // one thread moves the tile: the bytes, not the threads, are timed
  const char* src = reinterpret_cast<const char*>(a.state + (int64_t(a.slots[item / a.H]) * a.H + item % a.H) * kTile);
  char* dst = reinterpret_cast<char*>(a.dst + int64_t(item) * Q * kTile);
  auto load = [&](int c) {
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &full[c % kStages],
                                   uint32_t(kChunkBytes));
    ptx::cp_async_bulk(ptx::space_shared, ptx::space_global, sm + (c % kStages) * kChunkBytes, src + c * kChunkBytes,
                       uint32_t(kChunkBytes), &full[c % kStages]);
  };
  for (int c = 0; c < kStages; ++c) load(c);
  for (int c = 0; c < kChunks; ++c) {
    while (!ptx::mbarrier_try_wait_parity(&full[c % kStages], uint32_t((c / kStages) & 1))) {}
    for (int t = 0; t < Q; ++t)
      ptx::cp_async_bulk(ptx::space_global, ptx::space_shared, dst + int64_t(t) * kTile * 4 + c * kChunkBytes,
                         sm + (c % kStages) * kChunkBytes, uint32_t(kChunkBytes));
    ptx::cp_async_bulk_commit_group();
    if (c + kStages < kChunks) {
      ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>{});  // the stage is read out: refill it
      load(c + kStages);
    }
  }
  ptx::cp_async_bulk_wait_group(ptx::n32_t<0>{});
}

int main(int argc, char** argv) {
  std::vector<int> pos;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--csv") {  // (gpu_run.sh's ladder stage: the table goes to stdout)
      ++i;
      continue;
    }
    pos.push_back(std::atoi(argv[i]));
  }
  const int H = pos.size() >= 2 ? pos[0] : 96, B = pos.size() >= 2 ? pos[1] : 256, items = H * B;
  constexpr int kMaxQ = 8;
  // N steps per graph (as kda_bench: together ≥ 400 MB of state read, at least 4); each step writes
  // its own region of Q tiles per item
  const int N = std::max(4, std::min(64, int(std::ceil(400e6 / (double(items) * 65536)))));
  const int P = B * N + 1;
  std::printf("# per_token_move: H = %d, B = %d, %d steps per graph, read pool %.1f GB, write pool %.1f GB\n", H, B, N,
              double(P) * H * kTile * 4 / 1e9, double(N) * items * kMaxQ * kTile * 4 / 1e9);
  float *state, *wpool;
  CK(cudaMalloc(&state, size_t(P) * H * kTile * 4));
  CK(cudaMalloc(&wpool, size_t(N) * items * kMaxQ * kTile * 4));
  CK(cudaMemset(state, 0, size_t(P) * H * kTile * 4));
  CK(cudaMemset(wpool, 0, size_t(N) * items * kMaxQ * kTile * 4));
  float4 *io_in, *io_out;  // +io: each step's other inputs and outputs
  const size_t io_in_n = size_t(N) * items * io_in_pieces(kMaxQ), io_out_n = size_t(N) * items * io_out_pieces(kMaxQ);
  CK(cudaMalloc(&io_in, io_in_n * 16));
  CK(cudaMalloc(&io_out, io_out_n * 16));
  CK(cudaMemset(io_in, 0, io_in_n * 16));
  CK(cudaMemset(io_out, 0, io_out_n * 16));
  std::mt19937 rng(7);
  std::vector<int32_t> perm(P - 1);
  for (int i = 0; i < P - 1; ++i) perm[i] = i + 1;
  std::shuffle(perm.begin(), perm.end(), rng);
  int32_t* slots;
  CK(cudaMalloc(&slots, size_t(N) * B * 4));
  CK(cudaMemcpy(slots, perm.data(), size_t(N) * B * 4, cudaMemcpyHostToDevice));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  const double ceiling = copy_ceiling();
  std::printf(
      "# copy ceiling %.0f GB/s (floor: the rung's bytes / ceiling; +io rungs move kda_bench's per_token bytes)\n",
      ceiling / 1e9);
  std::printf("%-11s %10s %12s %8s %9s\n", "rung", "us/step", "floor us", "x", "%ceil");
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  auto rung = [&](const std::string& name, int q, bool io, auto&& enqueue_step) {
    const double bytes =
        double(items) * ((1 + q) * kTile * 4 + (io ? 16.0 * (io_in_pieces(q) + io_out_pieces(q)) : 0.0));
    const double us = graph_replay_ms(st,
                                      [&] {
                                        for (int i = 0; i < N; ++i) enqueue_step(i);
                                      }) *
                      1e3 / N;
    const double fl = bytes / ceiling * 1e6;
    std::printf("%-11s %10.2f %12.2f %8.3f %8.1f%%\n", name.c_str(), us, fl, us / fl,
                100.0 * (bytes / (us * 1e-6)) / ceiling);
  };
  auto args = [&](int i, int q) {
    return Args{state,
                slots + size_t(i) * B,
                wpool + size_t(i) * items * q * kTile,
                H,
                items,
                io_in + size_t(i) * items * io_in_pieces(q),
                io_out + size_t(i) * items * io_out_pieces(q),
                io_in_pieces(q),
                io_out_pieces(q)};
  };
  auto both = [&](auto qc) {
    constexpr int q = decltype(qc)::value;
    const dim3 flat_grid(unsigned(sms * 8));
    const std::string w = "/w" + std::to_string(q);
    rung("flat" + w, q, false,
         [&](int i) { launch_pdl(flat_kernel<q, false, false>, flat_grid, kThreads, 0, st, args(i, q)); });
    rung("cs" + w, q, false,
         [&](int i) { launch_pdl(flat_kernel<q, true, false>, flat_grid, kThreads, 0, st, args(i, q)); });
    rung("flat+io" + w, q, true,
         [&](int i) { launch_pdl(flat_kernel<q, false, true>, flat_grid, kThreads, 0, st, args(i, q)); });
    rung("cs+io" + w, q, true,
         [&](int i) { launch_pdl(flat_kernel<q, true, true>, flat_grid, kThreads, 0, st, args(i, q)); });
    const size_t smem = size_t(kStages) * kChunkBytes;
    CK(cudaFuncSetAttribute(tma_kernel<q>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    rung("tma" + w, q, false,
         [&](int i) { launch_pdl(tma_kernel<q>, dim3(unsigned(items)), kThreads, smem, st, args(i, q)); });
  };
  both(std::integral_constant<int, 1>{});
  both(std::integral_constant<int, 2>{});
  both(std::integral_constant<int, 4>{});
  both(std::integral_constant<int, 8>{});
  CK(cudaGetLastError());
  return 0;
}
