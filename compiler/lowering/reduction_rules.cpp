// Reductions (sum, mean, max): forward ops, and g expanded back over the
// reduced dims.
// One family's rules; autodiff.cpp picks the family from the op table.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_reduction(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Sum:
      return append(f.at, OpKind::Sum, {f.in[0]}, {AttrValue::ints("dims", to_ints(f.lop.axes))}, f.out);
    case ops::OpKind::Mean: {
      ir::ValueId sum = append(f.at, OpKind::Sum, {f.in[0]}, {AttrValue::ints("dims", to_ints(f.lop.axes))}, f.out);
      return append(f.at, OpKind::Scale, {sum}, {AttrValue::real("factor", 1.0 / mean_count(graph, f.lop))}, f.out);
    }
    case ops::OpKind::Max:
      return append(f.at, OpKind::ReduceMax, {f.in[0]}, {AttrValue::ints("dims", to_ints(f.lop.axes))}, f.out);
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_reduction(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Sum:
    case ops::OpKind::Mean:
      if (s.wanted(0)) {
        Emit e = s.emit_at(0);
        ir::ValueId grad = s.g;
        if (s.lop.type == ops::OpKind::Mean)
          grad =
              append(e, OpKind::Scale, {s.g}, {AttrValue::real("factor", 1.0 / mean_count(graph, s.lop))}, s.g_layout);
        s.give(0, s.expand(e, grad, 0, s.lop.axes));
      }
      break;
    case ops::OpKind::Max:
      if (s.wanted(0)) {
        // Each part compares with the global maximum; ties all get dy.
        Emit comm = s.emit_at(0);
        comm.stream = ir::Stream::Feature;
        ir::Layout out = output_layout(s.op);
        ir::Layout whole = out;
        for (ir::Sbp& axis : whole)
          if (axis.kind == ir::Sbp::PartialMax) axis = kBroadcast;
        ir::ValueId max = box(comm, s.y, out, whole);
        s.give(0, append(s.emit_at(0), OpKind::ReduceMaxGrad, {s.g, s.in(0), max},
                         {AttrValue::ints("dims", to_ints(s.lop.axes))}, s.grad_layout_of(0)));
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
