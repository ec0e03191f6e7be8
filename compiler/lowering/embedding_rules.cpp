// Embedding: the lookup, and the table's gradient, offset on a vocabulary
// split.
// One family's rules; autodiff.cpp picks the family from the op table.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_embedding(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Embedding: {
      int axis = vocab_split_axis(f.op);
      return append(f.at, OpKind::Embedding, {f.in[0], f.in[1]}, {AttrValue::integer("offset_axis", axis)}, f.out);
    }
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_embedding(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Embedding:
      if (s.wanted(0)) {
        int64_t vocab = type_of(s.in(0)).dim(0);
        s.give(0,
               append(s.emit_at(0), OpKind::EmbeddingGrad, {s.g, s.in(1)},
                      {AttrValue::integer("vocab", vocab), AttrValue::integer("offset_axis", vocab_split_axis(s.op))},
                      s.grad_layout_of(0)));
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
