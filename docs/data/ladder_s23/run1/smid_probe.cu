// probe: which SM each CTA of a 384-CTA grid (3 CTAs per SM by shared memory) lands on,
// alone and as the second of two PDL-chained grids
#include <cstdio>
#include <vector>
#include <map>
#include <cuda_runtime.h>
__global__ void probe(unsigned* smid_out, int spin_ns) {
  extern __shared__ unsigned char sm[];
  unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  cudaTriggerProgrammaticLaunchCompletion();
  cudaGridDependencySynchronize();
  if (threadIdx.x == 0) { smid_out[blockIdx.x] = s; sm[0] = 1; }
  long long t0 = clock64(); while (clock64() - t0 < spin_ns * 2) {}
}
int main() {
  const int n = 384, smem = 72 * 1024; int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  unsigned *a, *b; cudaMalloc(&a, n * 4 * 8); cudaMalloc(&b, n * 4 * 8);
  cudaLaunchConfig_t cfg = {}; cfg.gridDim = dim3(n); cfg.blockDim = dim3(256); cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at; cfg.numAttrs = 1;
  for (int rep = 0; rep < 4; ++rep) {
    for (int k = 0; k < 8; ++k) cudaLaunchKernelEx(&cfg, probe, (k & 1 ? b : a) + n * k, 5000);
    cudaDeviceSynchronize();
    std::vector<unsigned> h(n * 8); cudaMemcpy(h.data(), a, n * 4 * 8, cudaMemcpyDeviceToHost);
    std::vector<unsigned> h2(n * 8); cudaMemcpy(h2.data(), b, n * 4 * 8, cudaMemcpyDeviceToHost);
    for (int k = 0; k < 8; k += 7) {
      const unsigned* v = (k & 1 ? h2.data() : h.data()) + n * k;
      std::map<unsigned, int> per; for (int i = 0; i < n; ++i) per[v[i]]++;
      int same132 = 0, same1 = 0; for (int i = 0; i + sms < n; ++i) same132 += v[i] == v[i + sms];
      for (int i = 0; i + 1 < n; ++i) same1 += v[i] == v[i + 1];
      int maxper = 0; for (auto& kv : per) maxper = std::max(maxper, kv.second);
      printf("rep %d grid %d: %zu SMs used, max %d per SM, smid(b)==smid(b+%d): %d of %d, ==smid(b+1): %d; first:", rep, k, per.size(), maxper, sms, same132, n - sms, same1);
      for (int i = 0; i < 12; ++i) printf(" %u", v[i]);
      printf(" | b+%d:", sms); for (int i = 0; i < 12; ++i) printf(" %u", v[i + sms]);
      printf("\n");
    }
  }
  printf("%s\n", cudaGetErrorString(cudaGetLastError()));
}
