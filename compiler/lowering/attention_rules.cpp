// Attention: the forward op, and one fused grad op for q, k and v.
// One family's rules; autodiff.cpp picks the family from the op table.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_attention(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Attention:
      return append(f.at, OpKind::Attention, {f.in[0], f.in[1], f.in[2]}, {AttrValue::boolean("causal", f.lop.causal)},
                    f.out);
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_attention(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Attention:
      if (s.wanted(0) || s.wanted(1) || s.wanted(2)) {
        std::vector<ir::ValueId> operands{s.g, s.in(0), s.in(1), s.in(2)};
        std::vector<AttrValue> attrs{AttrValue::boolean("causal", s.lop.causal)};
        std::vector<ir::Layout> layouts{s.grad_layout_of(0), s.grad_layout_of(1), s.grad_layout_of(2)};
        std::vector<ir::ValueId> r = append_multi(s.emit_at(0), OpKind::AttentionGrad, operands, attrs, layouts);
        for (size_t i = 0; i < 3; ++i)
          if (s.wanted(i)) s.give(i, r[i]);
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
