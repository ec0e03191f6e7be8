#include "backends/reference/partial_tracking.h"

#include <functional>

#include <fmt/format.h>

#include "backends/reference/logical_layout.h"
#include "ir/registry.h"

namespace dstc::reference {

namespace {

using ir::OpKind;

using ir::Linearity;

// Operand positions batchnorm_input_grad is jointly linear in.
bool joint_gradient_operand(size_t i) { return i == 0 || i == 5 || i == 6; }

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

// The mesh axes (of `spanned`) that split an operand dim in `dims`.
uint32_t axes_splitting(const ir::Module& module, const ir::Function& f, const ir::Op& op, uint32_t spanned,
                        std::span<const ir::ReducedDims::Dim> dims) {
  std::span<const ir::ValueId> in = f.operands(op);
  uint32_t axes = 0;
  for (const ir::ReducedDims::Dim& d : dims)
    axes |= split_axes(module, f, in[d.operand], spanned, [&](int s) { return s == d.dim; });
  return axes;
}

// What result `result` sums or maximizes away, by the op's registered rule.
ir::ReducedDims reduced_dims(const ir::Module& module, const ir::Function& f, const ir::Op& op, size_t result) {
  ir::ReducedDims reduced;
  const ir::OpInfo& info = ir::op_info(op.kind);
  if (!info.reduced) return reduced;
  std::vector<ir::TensorType> types;
  for (ir::ValueId v : f.operands(op)) types.push_back(module.value_type(f, v));
  ir::AttrReader attrs(module, f, op);
  info.reduced({types, attrs}, result, reduced);
  return reduced;
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

  const Linearity lin = info.linearity;
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
    const ir::ReducedDims reduced = reduced_dims(module, f, op, static_cast<size_t>(i));
    PartialAxes& result = r.results[static_cast<size_t>(i)];
    result = out;
    result.sum |= axes_splitting(module, f, op, spanned, reduced.summed) | (reduced.partial_mesh_axes & spanned);
    result.max |= axes_splitting(module, f, op, spanned, reduced.maxed);
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
