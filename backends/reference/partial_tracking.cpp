#include "backends/reference/partial_tracking.h"

#include <functional>

#include <fmt/format.h>

#include "backends/reference/logical_layout.h"
#include "ir/pointwise_ops.h"
#include "ir/registry.h"

namespace dstc::reference {

namespace {

using ir::OpKind;

// How an op combines partial operands.
enum class Linearity : uint8_t {
  None,       // needs every operand whole
  First,      // linear in operand 0 only
  Sum,        // a sum of its operands: all partial on an axis, or none
  Product,    // linear in each operand: at most one partial per axis
  Gradients,  // batchnorm_input_grad: linear in dy, dgamma and dbeta jointly
};

// Operand positions batchnorm_input_grad is jointly linear in.
bool joint_gradient_operand(size_t i) { return i == 0 || i == 5 || i == 6; }

Linearity linearity(OpKind kind, size_t operands) {
  // An activation's gradient is linear in dy, its first operand.
  if (const ir::PointwiseOp* p = ir::find_pointwise(kind); p && p->grad == kind) return Linearity::First;
  switch (kind) {
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Accumulate:
    case OpKind::Concat: return Linearity::Sum;
    case OpKind::Mul:
    case OpKind::Matmul:
    case OpKind::CombineGateGrad:
    case OpKind::Conv2d:
    case OpKind::Conv2dWeightGrad: return Linearity::Product;
    case OpKind::Einsum: return operands == 2 ? Linearity::Product : Linearity::First;
    case OpKind::Scale:
    case OpKind::Rope:
    case OpKind::TopKGrad:
    case OpKind::Dispatch:
    case OpKind::Combine:
    case OpKind::Div:
    case OpKind::Expand:
    case OpKind::Sum:
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Slice:
    case OpKind::Cast:
    case OpKind::Dropout:
    case OpKind::Embedding:
    case OpKind::AvgPool2d:
    case OpKind::Shard:
    case OpKind::Unshard:
    case OpKind::Partialize:
    case OpKind::SoftmaxGrad:
    case OpKind::LayerNormGrad:
    case OpKind::LayerNormWeightGrad:
    case OpKind::DropoutGrad:
    case OpKind::EmbeddingGrad:
    case OpKind::CrossEntropyGrad:
    case OpKind::AttentionGrad:
    case OpKind::Conv2dInputGrad:
    case OpKind::MaxPool2dGrad:
    case OpKind::AvgPool2dGrad:
    case OpKind::BatchNormGrad:
    case OpKind::MaximumGrad:
    case OpKind::LogSoftmaxGrad:
    case OpKind::RmsNormGrad:
    case OpKind::RmsNormWeightGrad:
    case OpKind::ReduceMaxGrad:
    case OpKind::BatchNormWeightGrad: return Linearity::First;
    // dx is linear in (dy, dgamma, dbeta) together: partial on the same axes or whole.
    case OpKind::BatchNormInputGrad: return Linearity::Gradients;
    default: return Linearity::None;
  }
}

// Mesh axes (of `spanned`) that split dim d of value v per its declared layout.
uint32_t split_axes(const ir::Module& module, const ir::Function& f, ir::ValueId v, uint32_t spanned,
                    const std::function<bool(int)>& dim_matches) {
  const ir::Value& value = f.values[v];
  if (value.layout == ir::kNoLayout) return 0;
  const ir::Layout& layout = module.layout(value.layout);
  uint32_t axes = 0;
  for (size_t a = 0; a < layout.size(); ++a)
    if ((spanned >> a & 1u) && layout[a].kind == ir::Sbp::Split && dim_matches(layout[a].dim)) axes |= 1u << a;
  return axes;
}

// Axes over which the op sums a split operand dim away: its result is
// partial there even when no operand is.
uint32_t reduced_split_axes(const ir::Module& module, const ir::Function& f, const ir::Op& op, uint32_t spanned,
                            size_t result) {
  std::span<const ir::ValueId> in = f.operands(op);
  ir::AttrReader attrs(module, f, op);
  auto rank_of = [&](size_t i) { return static_cast<int>(module.value_type(f, in[i]).rank); };
  auto split = [&](size_t i, auto pred) { return split_axes(module, f, in[i], spanned, pred); };
  switch (op.kind) {
    case OpKind::Einsum: {
      std::string_view spec = attrs.string("spec");
      size_t arrow = spec.find("->");
      std::string_view output = spec.substr(arrow + 2), lhs = spec.substr(0, arrow);
      uint32_t axes = 0;
      size_t start = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        size_t comma = lhs.find(',', start);
        std::string_view term = lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start);
        start = comma + 1;
        axes |= split(i, [&](int d) {
          return d < static_cast<int>(term.size()) && output.find(term[static_cast<size_t>(d)]) == output.npos;
        });
      }
      return axes;
    }
    case OpKind::Matmul: {
      int ra = rank_of(0), rb = rank_of(1);
      int ka = attrs.boolean("transpose_a") ? ra - 2 : ra - 1;
      int kb = attrs.boolean("transpose_b") ? rb - 1 : rb - 2;
      return split(0, [&](int d) { return d == ka; }) | split(1, [&](int d) { return d == kb; });
    }
    case OpKind::Sum:
    case OpKind::CountNonzero: {
      uint32_t axes = 0;
      for (int64_t d : attrs.ints("dims")) {
        int dim = static_cast<int>(d < 0 ? d + rank_of(0) : d);
        axes |= split(0, [&](int s) { return s == dim; });
      }
      return axes;
    }
    case OpKind::Embedding: {
      int64_t axis = attrs.integer("offset_axis");
      return axis >= 0 && (spanned >> axis & 1u) ? 1u << axis : 0;  // rows of other shards are zeros
    }
    case OpKind::EmbeddingGrad: return split(1, [](int) { return true; });
    case OpKind::CrossEntropy: return split(0, [&](int) { return true; });
    // A shard's parts add up over the classes; the total over the rows.
    case OpKind::CrossEntropyParts: return split(0, [&](int d) { return d == rank_of(0) - 1; });
    case OpKind::CrossEntropyTotal: return split(0, [&](int) { return true; });
    case OpKind::LayerNormWeightGrad: return split(1, [&](int d) { return d < rank_of(1) - 1; });
    case OpKind::Conv2dWeightGrad: return split(0, [](int d) { return d == 0; });
    case OpKind::BatchNormGrad: return result == 0 ? 0 : split(1, [](int d) { return d != 1; });
    // Local statistics (groups > 1) keep the batch shards' sums apart.
    case OpKind::BatchNormStats:
    case OpKind::BatchNormWeightGrad: {
      const bool local = attrs.integer("groups") > 1;
      return split(op.kind == OpKind::BatchNormStats ? 0 : 1, [&](int d) { return d != 1 && !(local && d == 0); });
    }
    case OpKind::RmsNormWeightGrad: return split(1, [&](int d) { return d < rank_of(1) - 1; });
    // dk and dv sum over q's rows: a split query sequence (context
    // parallelism) leaves them partial.
    case OpKind::AttentionGrad: return result == 0 ? 0 : split(1, [](int d) { return d == 2; });
    // A token sums its experts' slots; the gates' gradient sums over h.
    case OpKind::Combine:
      return split(0, [&](int d) { return d == rank_of(0) - 3; }) |
             split(1, [&](int d) { return d == rank_of(1) - 1; });
    case OpKind::CombineGateGrad:
      return split(0, [&](int d) { return d == rank_of(0) - 1; }) |
             split(1, [&](int d) { return d == rank_of(1) - 1; });
    default: return 0;
  }
}

}  // namespace

uint32_t spanned_axes(const ir::Module& module, ir::DeviceSetId set) {
  uint32_t axes = 0;
  for (int a = 0; a < module.mesh().axis_count(); ++a)
    if (axis_span(module, set, a).extent > 1) axes |= 1u << a;
  return axes;
}

PartialAxes declared_partial(const ir::Module& module, const ir::Function& f, ir::ValueId v) {
  const ir::Value& value = f.values[v];
  PartialAxes p;
  if (value.layout == ir::kNoLayout) return p;
  const ir::Layout& layout = module.layout(value.layout);
  uint32_t spanned = spanned_axes(module, value.devices);
  for (size_t a = 0; a < layout.size(); ++a) {
    if (!(spanned >> a & 1u)) continue;
    if (layout[a].kind == ir::Sbp::PartialSum) p.sum |= 1u << a;
    if (layout[a].kind == ir::Sbp::PartialMax) p.max |= 1u << a;
  }
  return p;
}

std::string axis_names(const ir::Mesh& mesh, uint32_t axes) {
  std::string names;
  for (int a = 0; a < mesh.axis_count(); ++a)
    if (axes >> a & 1u) names += (names.empty() ? "" : ", ") + mesh.axes()[static_cast<size_t>(a)].name;
  return names;
}

PartialInference infer_partial(const ir::Module& module, const ir::Function& f, const ir::Op& op,
                               std::span<const PartialAxes> operands) {
  PartialInference r;
  r.results.assign(op.result_count, {});
  r.checked.assign(op.result_count, true);
  const ir::OpInfo& info = ir::op_info(op.kind);
  const ir::Mesh& mesh = module.mesh();
  const uint32_t spanned = spanned_axes(module, op.devices);
  std::span<const ir::ValueId> in = f.operands(op);
  auto name = [&](size_t i) { return "%" + module.value_name(f, in[i]); };
  auto fail = [&](std::string message) {
    r.error = std::move(message);
    return r;
  };

  if (info.category == ir::OpCategory::Collective) {
    if (op.aux != ir::kNone) {  // explicit groups: not tied to mesh axes, trust the declared layout
      r.checked.assign(op.result_count, false);
      return r;
    }
    const uint32_t over = op.group_axes & spanned;
    ir::AttrReader attrs(module, f, op);
    bool reduces = op.kind == OpKind::AllReduce || op.kind == OpKind::ReduceScatter || op.kind == OpKind::Reduce;
    // A grouped collective: each operand gives its result.
    for (int i = 0; i < op.result_count; ++i) {
      PartialAxes p = operands[static_cast<size_t>(i)];
      if (reduces) {
        bool max = attrs.string("op") == "max";
        uint32_t missing = over & ~(max ? p.any() : p.sum);
        if (!max && missing != 0)
          return fail(fmt::format(
              "{} over [{}] sums {}, which is not partial on {}: every member holds the whole "
              "value, so the sum counts it once per member",
              ir::op_name(op.kind), axis_names(mesh, over), name(static_cast<size_t>(i)), axis_names(mesh, missing)));
        p.sum &= ~over;
        p.max &= ~over;
      } else if ((p.any() & over) != 0) {
        return fail(fmt::format("{} over [{}] reads {}, which is partial on {}, as if it were whole",
                                ir::op_name(op.kind), axis_names(mesh, over), name(static_cast<size_t>(i)),
                                axis_names(mesh, p.any() & over)));
      }
      r.results[static_cast<size_t>(i)] = p;
    }
    return r;
  }
  if (info.category == ir::OpCategory::PointToPoint) {
    if (!operands.empty()) r.results.clear();
    return r;
  }

  const Linearity lin = linearity(op.kind, in.size());
  PartialAxes out;
  uint32_t float_partial_union = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (info.shape_only_operands >> i & 1u) continue;
    const PartialAxes& p = operands[i];
    if (p.max != 0)
      return fail(fmt::format("{} reads {}, which is partial (max) on {}, as if it were whole", ir::op_name(op.kind),
                              name(i), axis_names(mesh, p.max)));
    if (p.sum == 0) continue;
    bool linear_here = lin == Linearity::Sum || lin == Linearity::Product || (lin == Linearity::First && i == 0) ||
                       (lin == Linearity::Gradients && joint_gradient_operand(i));
    if (!linear_here)
      return fail(
          fmt::format("{} reads {}, which is partial (a summand of the value) on {}, as if it were whole: "
                      "the op is not linear in that operand",
                      ir::op_name(op.kind), name(i), axis_names(mesh, p.sum)));
    if (lin == Linearity::Product && (float_partial_union & p.sum) != 0)
      return fail(
          fmt::format("{} multiplies two values partial on {}: the product of summands is not the summand "
                      "of the product",
                      ir::op_name(op.kind), axis_names(mesh, float_partial_union & p.sum)));
    float_partial_union |= p.sum;
    out.sum |= p.sum;
  }
  if (lin == Linearity::Sum || lin == Linearity::Gradients) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (lin == Linearity::Gradients && !joint_gradient_operand(i)) continue;
      uint32_t mixed = operands[i].sum ^ out.sum;
      if (mixed != 0)
        return fail(fmt::format("{} adds {}, which is {} on {}, to a value that is {} there", ir::op_name(op.kind),
                                name(i), operands[i].sum & mixed ? "partial" : "whole", axis_names(mesh, mixed),
                                operands[i].sum & mixed ? "whole" : "partial"));
    }
  }
  if (op.kind == OpKind::Shard || op.kind == OpKind::Unshard || op.kind == OpKind::Partialize) {
    ir::AttrReader attrs(module, f, op);
    int64_t axis = attrs.integer("axis");
    uint32_t bit = axis >= 0 && axis < 32 ? 1u << axis : 0;
    if (attrs.has("span") && attrs.integer("span") != 0) bit = static_cast<uint32_t>(attrs.integer("span"));
    if (operands[0].sum & bit)
      return fail(fmt::format("{} on mesh axis {} reads {}, which is already partial there", ir::op_name(op.kind),
                              axis_names(mesh, bit), name(0)));
    if (op.kind != OpKind::Shard) out.sum |= bit & spanned;
  }
  for (int i = 0; i < op.result_count; ++i) {
    r.results[static_cast<size_t>(i)] = out;
    r.results[static_cast<size_t>(i)].sum |= reduced_split_axes(module, f, op, spanned, static_cast<size_t>(i));
  }
  if (op.kind == OpKind::ReduceMax) {  // the maximum over a split dim is a partial maximum
    ir::AttrReader attrs(module, f, op);
    const int rank = static_cast<int>(module.value_type(f, in[0]).rank);
    for (int64_t d : attrs.ints("dims")) {
      const int dim = static_cast<int>(d < 0 ? d + rank : d);
      r.results[0].max |= split_axes(module, f, in[0], spanned, [&](int s) { return s == dim; });
    }
  }
  if (op.kind == OpKind::Dropout) {  // the mask is the same on every device holding a summand
    r.results[1] = {};
    r.checked[1] = false;
  }
  if (op.kind == OpKind::Fill && ir::AttrReader(module, f, op).real("value") == 0)
    r.checked[0] = false;  // zeros are whole and partial alike
  return r;
}

}  // namespace dstc::reference
