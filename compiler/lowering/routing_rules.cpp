// Routing (top-k, dispatch to experts, combine back): forward ops and
// gradients. One family's rules; autodiff.cpp picks the family from the op
// table. The routing itself (which gates are nonzero) has no gradient:
// dispatch gives none to its gates, combine gives each kept gate dz · y.
// A top_k with aux_loss also adds the load-balancing loss (Switch
// Transformer; Megatron-Core's aux_loss): for each micro-batch,
// aux_loss · n · Σ_i f_i · P_i over its n experts, f_i the share of the
// micro-batch's routes that go to expert i and P_i the mean score of
// expert i over its tokens, both over every device (the token counts are
// all-reduced, as SyncBN's statistics), averaged over the micro-batches as
// the main loss is. Its gradient goes to the scores alone:
// aux_loss · n · f_i / (T · M) for every token, T the micro-batch's tokens
// and M the micro-batches.
#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

namespace {

// top_k's attributes; its groups only where the routing is node-limited.
std::vector<ir::AttrValue> top_k_attrs(const LogicalOp& lop) {
  std::vector<ir::AttrValue> attrs{ir::AttrValue::integer("dim", lop.axis), ir::AttrValue::integer("k", lop.top_k)};
  if (lop.groups > 0) {
    attrs.push_back(ir::AttrValue::integer("groups", lop.groups));
    attrs.push_back(ir::AttrValue::integer("group_k", lop.group_k));
  }
  return attrs;
}

}  // namespace

ir::ValueId Lowering::forward_routing(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::TopK: {
      std::vector<ir::ValueId> operands{f.in[0]};
      std::vector<ir::Layout> layouts{f.out};
      ir::ValueId gates = append_multi(f.at, OpKind::TopK, operands, top_k_attrs(f.lop), layouts)[0];
      if (f.lop.aux_loss > 0 && spec.train.training) save_routed_counts(f, gates);
      return gates;
    }
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

void Lowering::save_routed_counts(const ForwardStep& f, ir::ValueId gates) {
  // Split over the tokens, each device counts its own: partial sums.
  ir::Layout partial = f.out;
  for (ir::Sbp& axis : partial)
    if (axis.kind == ir::Sbp::Split) axis = axis.dim == f.lop.axis ? split(0) : kPartial;
  ir::ValueId counts =
      append(f.at, ir::OpKind::CountNonzero, {gates}, {ir::AttrValue::integer("dim", f.lop.axis)}, partial);
  Emit boxing = f.at;
  boxing.stream = ir::Stream::Feature;
  save_extras(f.op, f.at.micro_batch, {box(boxing, counts, partial, ir::Layout(partial.size(), kBroadcast))});
}

ir::ValueId Lowering::load_balancing_grad(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  const int32_t scores = s.lop.inputs[0].tensor;
  const ir::Layout& layout = input_layout(s.op, 0);
  const ir::TensorType micro_batch = local_type(scores, ir::Layout(layout.size(), kBroadcast), ir::DType::F32);
  const double experts = static_cast<double>(micro_batch.dim(s.lop.axis));
  const double tokens = static_cast<double>(micro_batch.numel()) / experts;
  const double micro_batches = static_cast<double>(graph.tensors[scores].numel() / micro_batch.numel());
  // The mean over micro-batches of aux_loss · n · Σ_i (c_i / (k·T)) · P_i:
  // d/dscore[t, i] = aux_loss · n · c_i / (k · T² · M).
  const double factor = s.lop.aux_loss * experts / (static_cast<double>(s.lop.top_k) * tokens * tokens * micro_batches);
  Emit e = s.emit_at(0);
  const ir::Layout whole(layout.size(), kBroadcast);
  ir::ValueId counts = saved_extras(s.op, s.at.micro_batch).back();
  ir::ValueId scaled = append(e, OpKind::Scale, {counts}, {AttrValue::real("factor", factor)}, whole);
  const ir::TensorType& local = type_of(s.in(0));
  std::vector<int64_t> shape(local.shape().begin(), local.shape().end()), over_tokens;
  for (int d = 0; d < local.rank; ++d)
    if (d != s.lop.axis) over_tokens.push_back(d);
  ir::ValueId grad = append(e, OpKind::Expand, {scaled},
                            {AttrValue::ints("shape", shape), AttrValue::ints("dims", over_tokens)}, layout);
  if (local.dtype != ir::DType::F32)
    grad = append(e, OpKind::Cast, {grad}, {AttrValue::string("dtype", ir::dtype_name(local.dtype))}, layout);
  // Where the scores are replicated their gradient is partial: one device
  // adds the term.
  return box(e, grad, layout, s.grad_layout_of(0));
}

void Lowering::backward_routing(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::TopK:
      if (s.wanted(0)) {
        std::vector<ir::ValueId> operands{s.g, s.in(0)};
        std::vector<ir::Layout> layouts{s.grad_layout_of(0)};
        s.give(0, append_multi(s.emit_at(0), OpKind::TopKGrad, operands, top_k_attrs(s.lop), layouts)[0]);
        if (s.lop.aux_loss > 0) s.give(0, load_balancing_grad(s));
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
