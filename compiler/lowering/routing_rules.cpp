// Routing (top-k, dispatch to experts, combine back): forward ops and
// gradients. One family's rules; autodiff.cpp picks the family from the op
// table. The routing itself (which gates are nonzero) has no gradient:
// dispatch gives none to its gates, combine gives each kept gate dz · y.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_routing(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::TopK:
      return append(f.at, OpKind::TopK, {f.in[0]},
                    {AttrValue::integer("dim", f.lop.axis), AttrValue::integer("k", f.lop.top_k)}, f.out);
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
        s.give(0, append(s.emit_at(0), OpKind::TopKGrad, {s.g, s.in(0)},
                         {AttrValue::integer("dim", s.lop.axis), AttrValue::integer("k", s.lop.top_k)},
                         s.grad_layout_of(0)));
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
