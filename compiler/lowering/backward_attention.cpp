// Backward rule of attention: one fused grad op for q, k and v.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

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
