// Backward rules of the contractions (einsum): each operand's gradient is an
// einsum of g with the other.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

void Lowering::backward_contraction(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Einsum: {
      const EinsumSpecs& specs = einsum_specs(s.op);
      if (s.lop.inputs.size() == 1) {
        if (s.wanted(0))
          s.give(0, append(s.emit_at(0), OpKind::Einsum, {s.g}, {AttrValue::string("spec", specs.grads[0])},
                           s.grad_layout_of(0)));
        break;
      }
      if (s.wanted(0)) {
        s.give(0, append(s.emit_at(0), OpKind::Einsum, {s.g, s.in(1)}, {AttrValue::string("spec", specs.grads[0])},
                         s.grad_layout_of(0)));
      }
      if (s.wanted(1)) {
        s.give(1, append(s.emit_at(1), OpKind::Einsum, {s.in(0), s.g}, {AttrValue::string("spec", specs.grads[1])},
                         s.grad_layout_of(1)));
      }
      break;
    }
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
