// A tensor held on the host by the reference executor: an IR dtype, a shape
// and row-major elements. Every element is stored as a double: floats are
// kept rounded to the executor's arithmetic (arithmetic.h), integers
// (token ids, labels, masks) are exact up to 2^53.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/types.h"

namespace dstc::reference {

struct HostTensor {
  ir::DType dtype = ir::DType::F32;
  std::vector<int64_t> shape;
  std::vector<double> data;

  HostTensor() = default;
  HostTensor(ir::DType t, std::span<const int64_t> dims);  // zeros
  explicit HostTensor(const ir::TensorType& type) : HostTensor(type.dtype, type.shape()) {}

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  int64_t dim(int i) const { return shape[static_cast<size_t>(i)]; }
};

// Row-major strides of a shape.
std::vector<int64_t> strides_of(std::span<const int64_t> shape);
int64_t numel_of(std::span<const int64_t> shape);

// The extent of dims [begin, end) multiplied together.
int64_t extent(std::span<const int64_t> shape, int begin, int end);

}  // namespace dstc::reference
