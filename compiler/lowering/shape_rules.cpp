// Shape ops (concat, reshape, select, slice): forward ops and gradients.
// One family's rules; autodiff.cpp picks the family from the op table.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_shape(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Concat: {
      std::vector<AttrValue> attrs{AttrValue::integer("dim", f.lop.axis)};
      return append_multi(f.at, OpKind::Concat, f.in, attrs, std::span<const ir::Layout>(&f.out, 1)).front();
    }
    case ops::OpKind::Reshape: {
      ir::TensorType shape = local_type(f.lop.output, f.out, type_of(f.in[0]).dtype);
      std::vector<int64_t> dims(shape.shape().begin(), shape.shape().end());
      return append(f.at, OpKind::Reshape, {f.in[0]}, {AttrValue::ints("shape", dims)}, f.out);
    }
    case ops::OpKind::Slice: {
      int64_t size = graph.tensors[f.lop.output].dims[f.lop.axis].size;
      return append(f.at, OpKind::Slice, {f.in[0]},
                    {AttrValue::integer("dim", f.lop.axis), AttrValue::integer("start", f.lop.attrs.integer("start")),
                     AttrValue::integer("end", f.lop.attrs.integer("start") + size)},
                    f.out);
    }
    case ops::OpKind::Select: {
      ir::Layout in_layout = input_layout(f.op, 0);
      ir::ValueId picked =
          append(f.at, OpKind::Slice, {f.in[0]},
                 {AttrValue::integer("dim", f.lop.axis), AttrValue::integer("start", f.lop.attrs.integer("index")),
                  AttrValue::integer("end", f.lop.attrs.integer("index") + 1)},
                 in_layout);
      ir::TensorType shape = local_type(f.lop.output, f.out, type_of(f.in[0]).dtype);
      std::vector<int64_t> dims(shape.shape().begin(), shape.shape().end());
      return append(f.at, OpKind::Reshape, {picked}, {AttrValue::ints("shape", dims)}, f.out);
    }
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_shape(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Concat: {
      // Each input's gradient is its slice of g.
      int64_t start = 0;
      for (size_t i = 0; i < s.lop.inputs.size(); ++i) {
        int64_t size = local_type(s.lop.inputs[i].tensor, input_layout(s.op, i), ir::DType::F32).dim(s.lop.axis);
        if (s.wanted(i)) {
          s.give(i, append(s.emit_at(i), OpKind::Slice, {s.g},
                           {AttrValue::integer("dim", s.lop.axis), AttrValue::integer("start", start),
                            AttrValue::integer("end", start + size)},
                           s.grad_layout_of(i)));
        }
        start += size;
      }
      break;
    }
    case ops::OpKind::Reshape:
      if (s.wanted(0)) {
        ir::TensorType shape = local_type(s.lop.inputs[0].tensor, input_layout(s.op, 0), type_of(s.g).dtype);
        std::vector<int64_t> dims(shape.shape().begin(), shape.shape().end());
        s.give(0, append(s.emit_at(0), OpKind::Reshape, {s.g}, {AttrValue::ints("shape", dims)}, s.grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Select:
    case ops::OpKind::Slice:
      if (s.wanted(0)) {
        // The gradient goes back to its indexes; the others get zeros.
        Emit e = s.emit_at(0);
        ir::TensorType full = local_type(s.lop.inputs[0].tensor, input_layout(s.op, 0), type_of(s.g).dtype);
        std::vector<int64_t> piece_dims(full.shape().begin(), full.shape().end());
        const int64_t size = piece_dims[s.lop.axis];
        const int64_t kept = s.lop.type == ops::OpKind::Select ? 1 : graph.tensors[s.lop.output].dims[s.lop.axis].size;
        piece_dims[s.lop.axis] = kept;
        ir::ValueId piece = s.g;
        if (s.lop.type == ops::OpKind::Select)  // the selected dim comes back, of size 1
          piece = append(e, OpKind::Reshape, {s.g}, {AttrValue::ints("shape", piece_dims)}, s.grad_layout_of(0));
        auto zeros = [&](int64_t n) {
          std::vector<int64_t> dims = piece_dims;
          dims[s.lop.axis] = n;
          return append(e, OpKind::Fill, {},
                        {AttrValue::ints("shape", dims), AttrValue::string("dtype", ir::dtype_name(full.dtype))},
                        s.grad_layout_of(0));
        };
        const int64_t first = s.lop.attrs.integer(s.lop.type == ops::OpKind::Select ? "index" : "start");
        std::vector<ir::ValueId> parts;
        if (first > 0) parts.push_back(zeros(first));
        parts.push_back(piece);
        if (first + kept < size) parts.push_back(zeros(size - first - kept));
        if (parts.size() == 1) {
          s.give(0, piece);
        } else {
          std::vector<AttrValue> attrs{AttrValue::integer("dim", s.lop.axis)};
          std::vector<ir::Layout> layouts{s.grad_layout_of(0)};
          s.give(0, append_multi(e, OpKind::Concat, parts, attrs, layouts).front());
        }
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
