// Instantiation: commit / flush kernel, fp32 and bf16 state.
#include "../step_launch.cuh"
template cudaError_t kda::cuda::launch_commit<float>(const kda::CommitParams&, cudaStream_t);
template cudaError_t kda::cuda::launch_commit<uint16_t>(const kda::CommitParams&, cudaStream_t);
