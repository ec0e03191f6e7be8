// When an einsum of two operands is one batched matrix product, and which:
// y[b] = op(L[b]) · op(R[b]), row-major, where the batch letters lead
// every term, y's remaining letters are L's free letters then R's, and
// each operand holds its free letters and the contracted ones as two
// blocks, in either order (the second order is a transpose). Linear
// layers, their gradients and attention's products are all of this form;
// an executor's device hands them to a GEMM library (cuBLASLt) and
// computes the rest itself.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace dstc::ir {

struct GemmPlan {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool swapped = false;      // L is the einsum's second operand, R its first
  bool transpose_l = false;  // L stored [batch, k, m] (else [batch, m, k])
  bool transpose_r = false;  // R stored [batch, n, k] (else [batch, k, n])
};

std::optional<GemmPlan> plan_gemm(std::string_view spec, std::span<const int64_t> first,
                                  std::span<const int64_t> second);

}  // namespace dstc::ir
