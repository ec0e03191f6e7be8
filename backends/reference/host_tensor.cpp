#include "backends/reference/host_tensor.h"

namespace dstc::reference {

HostTensor::HostTensor(ir::DType t, std::span<const int64_t> dims)
    : dtype(t), shape(dims.begin(), dims.end()), data(static_cast<size_t>(numel_of(dims)), 0.0) {}

std::vector<int64_t> strides_of(std::span<const int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * shape[static_cast<size_t>(i) + 1];
  return s;
}

int64_t numel_of(std::span<const int64_t> shape) { return extent(shape, 0, static_cast<int>(shape.size())); }

int64_t extent(std::span<const int64_t> shape, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

}  // namespace dstc::reference
