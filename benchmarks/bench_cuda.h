// benchmarks/bench_cuda.h — what every benchmark program shares: CK(call), a CUDA runtime
// call that must succeed (on an error it names the file, line, call and error, and exits with
// status 1); a launch with programmatic dependent launch; the timing protocol of BENCHMARKS.md:
// 3 warm-up runs, then the median of 15 runs timed with CUDA events; a CUDA graph replayed that
// way; the copy ceiling; `--sms N`'s green context (a program that calls use_sm_partition links the driver API).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

#define CU(x)                                                                        \
  do {                                                                               \
    CUresult r_ = (x);                                                               \
    if (r_ != CUDA_SUCCESS) {                                                        \
      const char* m_ = nullptr;                                                      \
      cuGetErrorString(r_, &m_);                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, m_ ? m_ : "?"); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

/// `--sms N`: the green context a benchmark's streams run in (null: the whole device).
inline CUgreenCtx g_bench_green = nullptr;

/// A green context of at least `sms` of device 0's SMs (cuDevSmResourceSplitByCount rounds up to the architecture's
/// granularity, 8 on sm_90), in which make_stream() then creates its streams: a card with more DRAM bandwidth per SM
/// (an H100 on 88 of its 132 SMs has the H200's). Nothing of the device's settings changes. Returns its SM count. The
/// runtime's primary context is made current first, so that the green context shares its allocations and modules.
inline int use_sm_partition(int sms) {
  CK(cudaFree(nullptr));
  CUdevice dev;
  CU(cuDeviceGet(&dev, 0));
  CUdevResource all{}, part{};
  CU(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
  if (sms < 1 || unsigned(sms) > all.sm.smCount) {
    std::fprintf(stderr, "--sms: expected 1 to %u SMs (the device's), got %d\n", all.sm.smCount, sms);
    std::exit(2);
  }
  unsigned groups = 1;
  CU(cuDevSmResourceSplitByCount(&part, &groups, &all, nullptr, 0, unsigned(sms)));
  if (groups < 1) {
    std::fprintf(stderr, "--sms: no partition of %d SMs on a device of %u\n", sms, all.sm.smCount);
    std::exit(2);
  }
  CUdevResourceDesc desc;
  CU(cuDevResourceGenerateDesc(&desc, &part, 1));
  CU(cuGreenCtxCreate(&g_bench_green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  return int(part.sm.smCount);
}

/// A non-blocking stream, in use_sm_partition's green context where there is one.
inline cudaStream_t make_stream() {
  cudaStream_t s;
  if (g_bench_green) {
    CUstream cs;
    CU(cuGreenCtxStreamCreate(&cs, g_bench_green, CU_STREAM_NON_BLOCKING, 0));
    s = cs;
  } else {
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return s;
}

/// One launch of `kernel(args)` on `grid` CTAs of `threads` with programmatic dependent launch,
/// as the library launches its step kernels (a grid may start while the previous one drains);
/// `cluster` > 1: in clusters of that many CTAs along x.
template <class Args>
void launch_pdl(void (*kernel)(Args), dim3 grid, int threads, size_t smem, cudaStream_t s, const Args& args,
                int cluster = 1) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[2]{};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = unsigned(cluster);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cluster > 1 ? 2 : 1;
  CK(cudaLaunchKernelEx(&cfg, kernel, args));
}

/// `launch()` (work enqueued on stream `s`) 3 times untimed, then 15 times between two events
/// on `s`: the median in ms.
template <class F>
float median_ms(F&& launch, cudaStream_t s = nullptr) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();
  CK(cudaStreamSynchronize(s));
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) {
    CK(cudaEventRecord(e0, s));
    launch();
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float t;
    CK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// `enqueue()` (work on `s`) captured once into a CUDA graph, replayed by median_ms: ms per replay.
template <class Enqueue>
float graph_replay_ms(cudaStream_t s, Enqueue&& enqueue) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  const float ms = median_ms([&] { CK(cudaGraphLaunch(ge, s)); }, s);
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return ms;
}

/// The device's copy ceiling in bytes per second (read + write): a 1 GiB device-to-device copy.
inline double copy_ceiling() {
  const size_t n = size_t(1) << 30;
  void *a, *b;
  CK(cudaMalloc(&a, n));
  CK(cudaMalloc(&b, n));
  CK(cudaMemset(a, 1, n));
  const float ms = median_ms([&] { CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); });
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * n / (ms * 1e-3);
}
