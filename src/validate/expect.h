// src/validate/expect.h — the vocabulary of operand checks. Each check throws the typed
// kda::Error of kda/errors.h whose message names the operand, what was expected and what
// came ("state: expected rank 4 [slots, H, V, K], got rank 3 [6, 2, 128]"). Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "kda/errors.h"
#include "kda/types.h"

namespace kda::validate {

std::string shape_str(const TensorView& t);    ///< "[2, 3, 128]"
std::string strides_str(const TensorView& t);  ///< "(384, 128, 1)"
std::string device_str(Device d, int id);      ///< "cpu" | "cuda:0"

/// The device every operand of a layer must be on (its weights').
struct Place {
  Device device = Device::kCPU;
  int id = 0;
};

void expect_defined(const TensorView& t, const std::string& name, const std::string& what);
void expect_dtype(const TensorView& t, const std::string& name, std::initializer_list<DType> ok);
void expect_rank(const TensorView& t, const std::string& name, int rank, const std::string& shape_doc);
void expect_dim(const TensorView& t, const std::string& name, int d, int64_t want, const std::string& what);
void expect_dim_at_least(const TensorView& t, const std::string& name, int d, int64_t want, const std::string& what);
void expect_device(const TensorView& t, const std::string& name, Place place);
void expect_unit_inner(const TensorView& t, const std::string& name);
void expect_aligned(const void* p, std::size_t bytes, const std::string& name);

/// An optional int32 vector [>=B] (rank 1, any stride) on the layer's device.
void expect_index_vector(const TensorView& t, const std::string& name, int64_t B, Place place);

}  // namespace kda::validate
