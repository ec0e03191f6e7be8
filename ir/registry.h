// The op registry: every op kind once, with its signature (operand and
// result counts, attributes with types and defaults), its shape rule (result
// types from operand types and attributes), its cost (FLOPs and bytes moved
// per device, for the cost model), which operands are read only for their
// shape (may stay abstract in a mixed abstract/concrete interpretation), and
// how partial-sum operands pass through it (its linearity and the dims it
// sums away).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/ids.h"
#include "ir/module.h"
#include "ir/types.h"

namespace dstc::ir {

enum class OpCategory : uint8_t { Compute, Optimizer, Collective, PointToPoint };

// How a compute op's kernel runs, which decides how the cost model prices
// its FLOPs and bytes (docs/cost-model.md).
enum class CostClass : uint8_t {
  Elementwise,  // memory bound, CUDA cores
  Matmul,       // tensor cores, efficiency rising with the smallest dimension
  Reduction,    // memory bound with a lower efficiency (softmax, norms, sums)
  Optimizer,    // memory bound, the fused multi-tensor optimizer step
  Free,         // no kernel: views and reshapes
};

struct AttrSpec {
  std::string_view name;
  AttrType type = AttrType::Int;
  bool required = false;
  int64_t default_int = 0;  // Int and Bool
  double default_float = 0;
  std::string_view default_string;
};

// Reads an op's attributes by name, falling back to the registered default.
class AttrReader {
 public:
  AttrReader(OpKind kind, std::span<const Attr> attrs, std::span<const int64_t> int_pool, const Module& module)
      : kind_(kind), attrs_(attrs), int_pool_(int_pool), module_(module) {}
  AttrReader(const Module& module, const Function& f, const Op& op)
      : AttrReader(op.kind, f.attrs(op), f.int_pool, module) {}

  OpKind kind() const { return kind_; }
  bool has(std::string_view name) const { return find(name) != nullptr; }
  int64_t integer(std::string_view name) const;
  double real(std::string_view name) const;
  bool boolean(std::string_view name) const { return integer(name) != 0; }
  std::string_view string(std::string_view name) const;
  std::span<const int64_t> ints(std::string_view name) const;  // empty when absent

 private:
  const Attr* find(std::string_view name) const;
  const AttrSpec& spec(std::string_view name) const;
  OpKind kind_;
  std::span<const Attr> attrs_;
  std::span<const int64_t> int_pool_;
  const Module& module_;
};

// What a shape rule or cost function sees of an op.
struct OpContext {
  std::span<const TensorType> operands;
  const AttrReader& attrs;
  int64_t group_size = 1;  // collectives: members per group
};

// Per-device cost of one execution of an op.
struct OpCost {
  double flops = 0;  // floating-point operations
  double bytes = 0;  // compute: bytes read + written; communication: bytes each device sends
};

using ShapeRule = bool (*)(const OpContext& ctx, std::vector<TensorType>& results, std::string& error);
using CostRule = OpCost (*)(const OpContext& ctx, std::span<const TensorType> results);

inline constexpr uint8_t kVariadic = 255;
// How a compute op's results follow from operands that are partial sums over
// a mesh axis (summands of the value, P(sum)): what lets a partial value
// flow through an op without a reduction. The reference executor checks
// every op of a program by it (backends/reference/partial_tracking.h).
enum class Linearity : uint8_t {
  None,       // needs every operand whole
  First,      // linear in operand 0 only
  Sum,        // a sum of its operands: all partial on an axis, or none
  Product,    // linear in each operand: at most one partial per axis
  Gradients,  // batchnorm_input_grad: linear in dy, dgamma and dbeta (operands 0, 5, 6) jointly
};

// The operand dims a result sums (or takes the maximum) over: where a mesh
// axis splits one, the result is partial over that axis even when no
// operand is.
struct ReducedDims {
  struct Dim {
    uint8_t operand;
    int dim;
  };
  std::vector<Dim> summed;
  std::vector<Dim> maxed;
  uint32_t partial_mesh_axes = 0;  // partial over these axes whatever the layouts (a vocabulary shard's zero rows)

  void sum(size_t operand, int dim) { summed.push_back({static_cast<uint8_t>(operand), dim}); }
  void sum_all(size_t operand, int rank) {
    for (int d = 0; d < rank; ++d) sum(operand, d);
  }
};

using ReducedDimsRule = void (*)(const OpContext& ctx, size_t result, ReducedDims& reduced);

// OpInfo::results of a grouped collective: one result per operand.
inline constexpr uint8_t kPerOperand = 255;

struct OpInfo {
  OpKind kind = OpKind::Matmul;
  std::string_view name;
  OpCategory category = OpCategory::Compute;
  CostClass cost_class = CostClass::Elementwise;
  uint8_t min_operands = 0;
  uint8_t max_operands = 0;  // kVariadic: any number >= min_operands
  uint8_t results = 1;       // kPerOperand: one per operand
  std::vector<AttrSpec> attrs;
  // Bit i: operand i is read only for its type (abstract suffices); other
  // operands' values are read by the op's semantics.
  uint32_t shape_only_operands = 0;
  ShapeRule infer = nullptr;  // nullptr: result types are given (recv)
  CostRule cost = nullptr;
  Linearity linearity = Linearity::None;
  ReducedDimsRule reduced = nullptr;  // nullptr: no result sums an operand dim away

  // -1 when the kind has no attribute of that name.
  int attr_slot(std::string_view attr) const;
  bool is_communication() const { return category == OpCategory::Collective || category == OpCategory::PointToPoint; }
};

const OpInfo& op_info(OpKind kind);
std::optional<OpKind> find_op_kind(std::string_view name);
std::string_view op_name(OpKind kind);

// Per-device cost of an op in a function (group sizes from the module), on
// the device its fill is fullest on.
OpCost op_cost(const Module& module, const Function& f, const Op& op);
// The share of an op's work that is real: the least fill of the values it
// reads and writes (an expert's GEMM runs on the slots its tokens fill,
// whatever else it reads).
Fill op_fill(const Function& f, const Op& op);

}  // namespace dstc::ir
