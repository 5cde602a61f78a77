// src/cuda_stub.cpp — linked instead of src/cuda/*.cu when the library is built without
// CUDA (no nvcc found, or KDA_CPU_ONLY=1).
#include <stdexcept>

#include "backend.h"

namespace kda {

std::unique_ptr<Backend> make_cuda_backend(int) {
  throw std::runtime_error(
      "kda-decode was built without the CUDA backend (KDA_CPU_ONLY=1 or no nvcc at build time); "
      "pass CPU tensors or rebuild with CUDA");
}

bool cuda_backend_built() { return false; }

}  // namespace kda
