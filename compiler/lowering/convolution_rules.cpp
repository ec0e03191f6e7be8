// Convolution and pooling: forward ops and their grads.
// One family's rules; autodiff.cpp picks the family from the op table.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_convolution(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Conv2d:
      return append(f.at, OpKind::Conv2d, {f.in[0], f.in[1]},
                    {AttrValue::ints("stride", pair(f.lop.attrs.integer("stride"))),
                     AttrValue::ints("padding", pair(f.lop.attrs.integer("padding")))},
                    f.out);
    case ops::OpKind::MaxPool2d:
    case ops::OpKind::AvgPool2d:
      return append(f.at, f.lop.type == ops::OpKind::MaxPool2d ? OpKind::MaxPool2d : OpKind::AvgPool2d, {f.in[0]},
                    {AttrValue::ints("kernel", pair(f.lop.attrs.integer("kernel"))),
                     AttrValue::ints("stride", pair(f.lop.attrs.integer("stride"))),
                     AttrValue::ints("padding", pair(f.lop.attrs.integer("padding")))},
                    f.out);
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_convolution(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Conv2d: {
      std::vector<ir::ValueId> operands;
      const std::vector<int64_t> stride = pair(s.lop.attrs.integer("stride")),
                                 padding = pair(s.lop.attrs.integer("padding"));
      std::vector<AttrValue> attrs{AttrValue::ints("stride", stride), AttrValue::ints("padding", padding)};
      if (s.wanted(0)) {
        operands = {s.g, s.in(0), s.in(1)};
        std::vector<ir::Layout> layouts{s.grad_layout_of(0)};
        s.give(0, append_multi(s.emit_at(0), OpKind::Conv2dInputGrad, operands, attrs, layouts).front());
      }
      if (s.wanted(1)) {
        operands = {s.g, s.in(0), s.in(1)};
        std::vector<ir::Layout> layouts{s.grad_layout_of(1)};
        s.give(1, append_multi(s.emit_at(1), OpKind::Conv2dWeightGrad, operands, attrs, layouts).front());
      }
      break;
    }
    case ops::OpKind::MaxPool2d:
    case ops::OpKind::AvgPool2d:
      if (s.wanted(0)) {
        s.give(0, append(s.emit_at(0),
                         s.lop.type == ops::OpKind::MaxPool2d ? OpKind::MaxPool2dGrad : OpKind::AvgPool2dGrad,
                         {s.g, s.in(0)},
                         {AttrValue::ints("kernel", pair(s.lop.attrs.integer("kernel"))),
                          AttrValue::ints("stride", pair(s.lop.attrs.integer("stride"))),
                          AttrValue::ints("padding", pair(s.lop.attrs.integer("padding")))},
                         s.grad_layout_of(0)));
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
