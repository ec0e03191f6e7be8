// What the op estimator needs to know about one op, independent of the IR's
// classes (the IR adapter fills it from an op and its operand types).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "htae/cluster_spec.h"

namespace dstc::htae {

struct OpCostQuery {
  std::string kind;  // the op kind's name: "matmul", "add", "softmax", ...
  ComputeDtype dtype = ComputeDtype::Fp32;
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  // Matmul-class ops: [m, n, k], a matmul's batch folded into m, an
  // einsum's batch left out (one of its GEMMs). Others: the output's shape
  // (used only to match profile entries).
  std::vector<int64_t> shape;

  double bytes() const { return bytes_read + bytes_written; }
};

// How an op kind is priced (docs/cost-model.md has the table of kinds).
enum class OpClass {
  Matmul,       // tensor cores, efficiency rising with the smallest dimension
  Elementwise,  // memory bound, CUDA cores
  Reduction,    // memory bound with a lower efficiency (softmax, norms, sums)
  Optimizer,    // memory bound, the fused multi-tensor optimizer step
  Free,         // no kernel: views and reshapes
};
OpClass classify_op(std::string_view kind);

}  // namespace dstc::htae
