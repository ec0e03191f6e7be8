// What the op estimator needs to know about one op: plain figures, no IR
// values, so profiles and tests can ask about an op by name (the IR
// adapter fills it from an op, its registry entry's cost class and its
// operand types).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "htae/cluster_spec.h"
#include "ir/registry.h"

namespace dstc::htae {

// How an op kind is priced: the IR registry's class of each op
// (docs/cost-model.md has the table of kinds).
using OpClass = ir::CostClass;

struct OpCostQuery {
  std::string kind;  // the op kind's name: "matmul", "add", "softmax", ...
  OpClass op_class = OpClass::Elementwise;
  ComputeDtype dtype = ComputeDtype::Fp32;
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
  // Matmul-class ops: [m, n, k], a matmul's batch folded into m, an
  // einsum's batch left out (one of its GEMMs). Others: the output's shape
  // (used only to match profile entries).
  std::vector<int64_t> shape;
  // An fp8 GEMM: how its operands are scaled, which sets the kernel's rate.
  ir::Fp8Scaling fp8_scaling = ir::Fp8Scaling::Tensorwise;

  double bytes() const { return bytes_read + bytes_written; }
};

}  // namespace dstc::htae
