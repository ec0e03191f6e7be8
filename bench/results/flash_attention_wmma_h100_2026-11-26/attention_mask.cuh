// Which keys a query row of attention sees (visible_keys of
// backends/cuda/step_kernels.cu, as a header for this experiment).
#pragma once

#include <cstdint>

#include "backends/cuda/step_kernels.h"

namespace dstc::cuda {

__device__ inline int64_t visible_keys(const AttentionShape& a, int64_t i) {
  if (!a.causal) return a.t;
  int64_t n = a.first_query + i + 1;
  return n < 0 ? 0 : (n > a.t ? a.t : n);
}

}  // namespace dstc::cuda
