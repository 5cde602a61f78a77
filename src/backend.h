// src/backend.h — the interface PreparedKda dispatches to: the CPU backend (src/cpu) or the
// CUDA backend (src/cuda). Internal; not installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kda/params.h"
#include "kda/plan.h"
#include "kda/types.h"

namespace kda {

/// Memory owned by a backend (host or device), e.g. the derived weights and the error flag.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() = 0;
  virtual std::size_t bytes() const = 0;
  /// Copies `bytes` from host memory into the buffer (synchronous).
  virtual void upload(const void* host, std::size_t bytes) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual const DeviceInfo& info() const = 0;
  virtual std::unique_ptr<Buffer> allocate(std::size_t bytes) = 0;
  /// Copies `bytes` of backend memory at `src` to host memory (synchronous, for weights).
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;
  /// Runs one step with a plan. Never allocates, never synchronises (CUDA). Kernel
  /// attributes are set once, when the backend is made.
  virtual void step(const StepParams& p, const Plan& plan, void* stream) = 0;
  /// Runs commit / flush.
  virtual void commit(const CommitParams& p, void* stream) = 0;
  /// The error slot the kernels write: flags and first index.
  virtual uint32_t* error_flags() = 0;
  virtual int32_t* error_index() = 0;
  /// Reads and clears the error slot (synchronising `stream` on CUDA).
  virtual Status read_status(void* stream) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();
/// Throws std::runtime_error when this build has no CUDA backend.
std::unique_ptr<Backend> make_cuda_backend(int device_id);
/// True when the library was built with the CUDA backend.
bool cuda_backend_built();

// CPU implementations of the contract, also used by tests as "the CPU backend".
void cpu_step(const StepParams& p, uint32_t* flags, int32_t* index);
void cpu_commit(const CommitParams& p, uint32_t* flags, int32_t* index);

}  // namespace kda
