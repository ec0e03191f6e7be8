// The elementwise ops other than the activations (ir/pointwise_ops.def
// lowers and differentiates those): forward ops and gradients; a broadcast
// operand's gradient is summed back over the dims it lacks.
// One family's rules; autodiff.cpp picks the family from the op table.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

// Operand i of a binary op as the op combines it: the IR broadcasts a
// second operand over the first's leading dims; over any others, and a
// first operand smaller than the second (a bias minus x), it is expanded to
// `full`'s shape first (materialized, where PyTorch would stride).
ir::ValueId Lowering::broadcast_operand(const Emit& at, int32_t op, size_t i, ir::ValueId full, ir::ValueId v) {
  std::vector<int32_t> missing = dims_input_lacks(graph.ops[op], i);
  if (missing.empty()) return v;
  bool leading = i == 1;
  for (size_t k = 0; k < missing.size(); ++k) leading &= missing[k] == static_cast<int32_t>(k);
  if (leading) return v;
  std::vector<int64_t> shape(type_of(full).shape().begin(), type_of(full).shape().end());
  std::vector<int64_t> dims(missing.begin(), missing.end());
  return append(at, ir::OpKind::Expand, {v}, {ir::AttrValue::ints("shape", shape), ir::AttrValue::ints("dims", dims)},
                input_layout(op, 1 - i));
}

ir::ValueId Lowering::forward_elementwise(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  auto first = [&] { return broadcast_operand(f.at, f.op, 0, f.in[1], f.in[0]); };
  auto second = [&] { return broadcast_operand(f.at, f.op, 1, f.in[0], f.in[1]); };
  switch (f.lop.type) {
    case ops::OpKind::Add: return append(f.at, OpKind::Add, {f.in[0], second()}, {}, f.out);
    case ops::OpKind::Sub: return append(f.at, OpKind::Sub, {first(), second()}, {}, f.out);
    case ops::OpKind::Mul: return append(f.at, OpKind::Mul, {f.in[0], second()}, {}, f.out);
    case ops::OpKind::Div: return append(f.at, OpKind::Div, {first(), second()}, {}, f.out);
    case ops::OpKind::Maximum: return append(f.at, OpKind::Maximum, {f.in[0], second()}, {}, f.out);
    case ops::OpKind::Exp: return append(f.at, OpKind::Exp, {f.in[0]}, {}, f.out);
    case ops::OpKind::Sqrt: return append(f.at, OpKind::Sqrt, {f.in[0]}, {}, f.out);
    case ops::OpKind::Scale:
      return append(f.at, OpKind::Scale, {f.in[0]}, {AttrValue::real("factor", f.lop.attrs.real("by"))}, f.out);
    case ops::OpKind::Rope:
      // After a KV cache's positions, this step's tokens are the next ones.
      if (spec.train.context > 0)
        return append(f.at, OpKind::Rope, {f.in[0]},
                      {AttrValue::integer("dim", f.lop.axis), AttrValue::real("base", f.lop.attrs.real("base")),
                       AttrValue::integer("offset", spec.train.context)},
                      f.out);
      return append(f.at, OpKind::Rope, {f.in[0]},
                    {AttrValue::integer("dim", f.lop.axis), AttrValue::real("base", f.lop.attrs.real("base"))}, f.out);
    case ops::OpKind::Dropout: {
      std::vector<ir::ValueId> operands{f.in[0]};
      std::vector<AttrValue> attrs{AttrValue::real("p", f.lop.attrs.real("p")), AttrValue::integer("seed", f.op)};
      ir::Layout mask = f.out;
      std::vector<ir::Layout> layouts{f.out, mask};
      std::vector<ir::ValueId> r = append_multi(f.at, OpKind::Dropout, operands, attrs, layouts);
      save_extras(f.op, f.at.micro_batch, {r[1]});
      return r[0];
    }
    default: no_forward_lowering(f.lop);
  }
}

void Lowering::backward_elementwise(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  // The second operand as the forward combined it with the first (sub and
  // div may broadcast either; the commutative ops have the full one first).
  auto second = [&](const Emit& at) { return broadcast_operand(at, s.op, 1, s.in(0), s.in(1)); };
  switch (s.lop.type) {
    case ops::OpKind::Add:
      if (s.wanted(0)) s.give(0, s.g);
      if (s.wanted(1)) s.give(1, s.unbroadcast(1, s.g));
      break;
    case ops::OpKind::Sub:
      if (s.wanted(0)) s.give(0, s.unbroadcast(0, s.g));
      if (s.wanted(1)) {
        ir::ValueId neg = append(s.emit_at(1), OpKind::Scale, {s.g}, {AttrValue::real("factor", -1.0)}, s.g_layout);
        s.give(1, s.unbroadcast(1, neg));
      }
      break;
    case ops::OpKind::Mul:
      if (s.wanted(0))
        s.give(0, append(s.emit_at(0), OpKind::Mul, {s.g, second(s.emit_at(0))}, {}, s.grad_layout_of(0)));
      if (s.wanted(1)) {
        ir::ValueId prod =
            append(s.emit_at(1), OpKind::Mul, {s.g, s.in(0)}, {}, product_layout(s.g_layout, input_layout(s.op, 0)));
        s.give(1, s.unbroadcast(1, prod));
      }
      break;
    case ops::OpKind::Div:
      // y = a / b: da = g / b, db = -(g y) / b, each summed over what its
      // operand was broadcast over.
      {
        // b as the forward divided by, expanded once per backward block.
        ir::ValueId b = ir::kNone;
        if (s.wanted(0)) {
          Emit e = s.emit_at(0);
          b = second(e);
          ir::Layout l = dims_input_lacks(s.lop, 0).empty() ? s.grad_layout_of(0)
                                                            : product_layout(s.g_layout, output_layout(s.op));
          s.give(0, s.unbroadcast(0, append(e, OpKind::Div, {s.g, b}, {}, l)));
        }
        if (s.wanted(1)) {
          Emit e = s.emit_at(1);
          if (b == ir::kNone || e.phase != s.emit_at(0).phase) b = second(e);
          ir::Layout l = product_layout(s.g_layout, output_layout(s.op));
          ir::ValueId gy = append(e, OpKind::Mul, {s.g, s.y}, {}, l);
          ir::ValueId q = append(e, OpKind::Div, {gy, b}, {}, l);
          s.give(1, s.unbroadcast(1, append(e, OpKind::Scale, {q}, {AttrValue::real("factor", -1.0)}, l)));
        }
      }
      break;
    case ops::OpKind::Maximum:
      if (s.wanted(0) || s.wanted(1)) {
        Emit e = s.emit_at(s.wanted(0) ? 0 : 1);
        std::vector<ir::ValueId> operands{s.g, s.in(0), second(e)};
        std::vector<ir::Layout> layouts{s.grad_layout_of(0), s.g_layout};
        std::vector<ir::ValueId> r = append_multi(e, OpKind::MaximumGrad, operands, {}, layouts);
        if (s.wanted(0)) s.give(0, r[0]);
        if (s.wanted(1)) s.give(1, s.unbroadcast(1, r[1]));
      }
      break;
    case ops::OpKind::Exp:
      if (s.wanted(0)) s.give(0, append(s.emit_at(0), OpKind::Mul, {s.g, s.y}, {}, s.grad_layout_of(0)));
      break;
    case ops::OpKind::Sqrt:
      if (s.wanted(0)) {
        ir::ValueId q = append(s.emit_at(0), OpKind::Div, {s.g, s.y}, {}, s.grad_layout_of(0));
        s.give(0, append(s.emit_at(0), OpKind::Scale, {q}, {AttrValue::real("factor", 0.5)}, s.grad_layout_of(0)));
      }
      break;
    case ops::OpKind::Scale:
      if (s.wanted(0))
        s.give(0, append(s.emit_at(0), OpKind::Scale, {s.g}, {AttrValue::real("factor", s.lop.attrs.real("by"))},
                         s.grad_layout_of(0)));
      break;
    case ops::OpKind::Rope:  // a rotation: its gradient rotates back
      if (s.wanted(0))
        s.give(0, append(s.emit_at(0), OpKind::Rope, {s.g},
                         {AttrValue::integer("dim", s.lop.axis), AttrValue::real("base", s.lop.attrs.real("base")),
                          AttrValue::boolean("inverse", true)},
                         s.grad_layout_of(0)));
      break;
    case ops::OpKind::Dropout:
      if (s.wanted(0)) {
        ir::ValueId mask = saved_extras(s.op, s.at.micro_batch).front();
        s.give(0, append(s.emit_at(0), OpKind::DropoutGrad, {s.g, mask}, {AttrValue::real("p", s.lop.attrs.real("p"))},
                         s.grad_layout_of(0)));
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
