// Routing (top-k, dispatch to experts, combine back): forward ops and
// gradients. One family's rules; autodiff.cpp picks the family from the op
// table. The routing itself (which gates are nonzero) has no gradient:
// dispatch gives none to its gates, combine gives each kept gate dz · y.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

namespace {

// top_k's attributes; its groups only where the routing is node-limited.
std::vector<ir::AttrValue> top_k_attrs(const LogicalOp& lop) {
  std::vector<ir::AttrValue> attrs{ir::AttrValue::integer("dim", lop.axis), ir::AttrValue::integer("k", lop.top_k)};
  if (lop.groups > 0) {
    attrs.push_back(ir::AttrValue::integer("groups", lop.groups));
    attrs.push_back(ir::AttrValue::integer("group_k", lop.group_k));
  }
  return attrs;
}

}  // namespace

ir::ValueId Lowering::forward_routing(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::TopK: {
      std::vector<ir::ValueId> operands{f.in[0]};
      std::vector<ir::Layout> layouts{f.out};
      return append_multi(f.at, OpKind::TopK, operands, top_k_attrs(f.lop), layouts)[0];
    }
    case ops::OpKind::Dispatch: {
      // The slots dim is never split: every device holds an expert's capacity.
      ir::TensorType slots = local_type(f.lop.output, f.out, compute_dtype(f.lop.output));
      return append(f.at, OpKind::Dispatch, {f.in[0], f.in[1]},
                    {AttrValue::integer("capacity", slots.dim(slots.rank - 2))}, f.out);
    }
    case ops::OpKind::Combine: return append(f.at, OpKind::Combine, {f.in[0], f.in[1]}, {}, f.out);
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_routing(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::TopK:
      if (s.wanted(0)) {
        std::vector<ir::ValueId> operands{s.g, s.in(0)};
        std::vector<ir::Layout> layouts{s.grad_layout_of(0)};
        s.give(0, append_multi(s.emit_at(0), OpKind::TopKGrad, operands, top_k_attrs(s.lop), layouts)[0]);
      }
      break;
    case ops::OpKind::Dispatch:
      if (s.wanted(0)) {
        s.give(0, append(s.emit_at(0), OpKind::Combine, {s.g, s.in(1)}, {AttrValue::boolean("weighted", false)},
                         s.grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Combine:
      if (s.wanted(0)) {
        const ir::TensorType& slots = type_of(s.in(0));
        s.give(0,
               append(s.emit_at(0), OpKind::Dispatch, {s.g, s.in(1)},
                      {AttrValue::integer("capacity", slots.dim(slots.rank - 2)), AttrValue::boolean("weighted", true)},
                      s.grad_layout_of(0)));
      }
      if (s.wanted(1)) {
        s.give(1, append(s.emit_at(1), OpKind::CombineGateGrad, {s.g, s.in(0), s.in(1)}, {}, s.grad_layout_of(1)));
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
