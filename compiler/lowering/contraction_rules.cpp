// Contractions (einsum): the forward einsum, and each operand's gradient as
// an einsum of g with the other.
// One family's rules; autodiff.cpp picks the family from the op table.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_contraction(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Einsum: {
      const std::string& spec_text = einsum_specs(f.op).forward;
      if (f.in.size() == 1)
        return append(f.at, OpKind::Einsum, {f.in[0]}, {AttrValue::string("spec", spec_text)}, f.out);
      return append(f.at, OpKind::Einsum, {f.in[0], f.in[1]}, {AttrValue::string("spec", spec_text)}, f.out);
    }
    default: no_forward_lowering(f.lop);
  }
}

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
