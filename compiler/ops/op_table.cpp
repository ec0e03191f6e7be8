#include "compiler/ops/op_table.h"

#include "compiler/ops/op_rules.h"
#include "ir/registry.h"

namespace dstc::ops {
namespace {

constexpr AttrSpec kDimAttr{"dim", AttrType::Dim, true};
constexpr AttrSpec kEpsAttr{"eps", AttrType::Float, false};

std::vector<OpDef> make_ops() {
  using enum Family;
  using enum OutputDims;
  using enum PartialInputs;
  return {
#define DSTC_OP(kind, name, family, min_inputs, max_inputs, output, dims_rule, split, partial, summary, ...) \
  {OpKind::kind, name, family, min_inputs, max_inputs, output, dims_rule, split, partial, summary, {__VA_ARGS__}},
#include "compiler/ops/op_kinds.def"
#undef DSTC_OP
  };
}

std::vector<OpDef> make_table() {
  std::vector<OpDef> ops = make_ops();
  // An activation's model op and IR op are one line of pointwise_ops.def,
  // so they share the name.
  for (OpDef& d : ops) {
    if (std::optional<ir::OpKind> kind = ir::find_op_kind(d.name)) d.pointwise = ir::find_pointwise(*kind);
  }
  return ops;
}

}  // namespace

std::span<const OpDef> all_ops() {
  static const std::vector<OpDef> ops = make_table();
  return ops;
}

const OpDef& op_def(OpKind kind) { return all_ops()[static_cast<size_t>(kind)]; }

const OpDef* find_op(std::string_view name) {
  for (const OpDef& d : all_ops()) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

std::string_view op_name(OpKind kind) { return op_def(kind).name; }

std::optional<std::vector<Dim>> infer_output(const OpDef& def, const std::vector<std::vector<Dim>>& inputs,
                                             const std::vector<AttrValue>& attrs,
                                             const std::optional<std::vector<DeclaredDim>>& declared, OpError& error) {
  return def.output_dims(DimsQuery{inputs, attrs, declared}, error);
}

}  // namespace dstc::ops
