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
// and M the micro-batches. seq_aux_loss is the same over each sequence
// (DeepSeek-V3's), averaged over the step's sequences.
#include <algorithm>

#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

namespace {

// top_k's attributes; its groups only where the routing is node-limited.
std::vector<ir::AttrValue> top_k_attrs(const LogicalOp& lop) {
  std::vector<ir::AttrValue> attrs{ir::AttrValue::integer("dim", lop.axis),
                                   ir::AttrValue::integer("k", lop.attrs.integer("k"))};
  append_expert_groups(lop, attrs);
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
      // A replayed router keeps its forward's counts.
      if ((f.lop.attrs.real("aux_loss") > 0 || f.lop.attrs.real("seq_aux_loss") > 0) && spec.train.training &&
          f.at.phase != ir::Phase::Recompute)
        save_routed_counts(f, gates);
      return gates;
    }
    case ops::OpKind::Dispatch: {
      // Each device's own slots: an expert's capacity, or its share where
      // the sequence is split (dropless routing).
      ir::TensorType slots = local_type(f.lop.output, f.out, compute_dtype(f.lop.output));
      return append(f.at, OpKind::Dispatch, {f.in[0], f.in[1]},
                    {AttrValue::integer("capacity", slots.dim(slots.rank - 2))}, f.out);
    }
    case ops::OpKind::Combine: return append(f.at, OpKind::Combine, {f.in[0], f.in[1]}, {}, f.out);
    default: no_forward_lowering(f.lop);
  }
}

namespace {

// The dims a load-balancing loss counts routes and averages scores over:
// every dim but the experts' (the micro-batch's tokens), or the one before
// it (each sequence's).
std::vector<int64_t> balance_dims(const LogicalOp& lop, int rank, bool per_sequence) {
  if (per_sequence) return {lop.axis - 1};
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d)
    if (d != lop.axis) dims.push_back(d);
  return dims;
}

}  // namespace

void Lowering::save_routed_counts(const ForwardStep& f, ir::ValueId gates) {
  std::vector<ir::ValueId> counts;
  for (bool per_sequence : {false, true}) {
    if ((per_sequence ? f.lop.attrs.real("seq_aux_loss") : f.lop.attrs.real("aux_loss")) <= 0) continue;
    // Each device counts its own tokens; where they split the counted
    // dims, the counts are partial sums, all-reduced.
    const std::vector<int64_t> dims = balance_dims(f.lop, type_of(gates).rank, per_sequence);
    const ir::Layout partial = reduced_layout(f.out, dims);
    ir::Layout whole = partial;
    for (ir::Sbp& axis : whole)
      if (axis.kind == ir::Sbp::PartialSum) axis = kBroadcast;
    ir::ValueId local = append(f.at, ir::OpKind::CountNonzero, {gates}, {ir::AttrValue::ints("dims", dims)}, partial);
    Emit boxing = f.at;
    boxing.stream = ir::Stream::Feature;
    counts.push_back(box(boxing, local, partial, whole));
  }
  save_extras(f.op, f.at.micro_batch, std::move(counts));
}

ir::ValueId Lowering::load_balancing_grad(BackwardStep& s, bool per_sequence) {
  using ir::AttrValue;
  using ir::OpKind;
  const int32_t scores = s.lop.inputs[0].tensor;
  const ir::Layout layout = input_layout(s.op, 0);
  const ir::TensorType micro_batch = local_type(scores, ir::Layout(layout.size(), kBroadcast), ir::DType::F32);
  const double experts = static_cast<double>(micro_batch.dim(s.lop.axis));
  // Each loss is averaged over the step's micro-batches (or sequences),
  // as the main loss is: aux · n · Σ_i (c_i / (k·T)) · P_i over T tokens,
  // of which d/dscore[t, i] = aux · n · c_i / (k · T² · M), M of them.
  const double tokens = per_sequence ? static_cast<double>(micro_batch.dim(s.lop.axis - 1))
                                     : static_cast<double>(micro_batch.numel()) / experts;
  const double groups = static_cast<double>(graph.tensors[scores].numel()) / (tokens * experts);
  const double coefficient = per_sequence ? s.lop.attrs.real("seq_aux_loss") : s.lop.attrs.real("aux_loss");
  const double factor =
      coefficient * experts / (static_cast<double>(s.lop.attrs.integer("k")) * tokens * tokens * groups);
  const std::vector<ir::ValueId>& saved = saved_extras(s.op, s.at.micro_batch);
  ir::ValueId counts = per_sequence ? saved.back() : saved.front();
  const ir::Layout counts_layout = module_.layout(function_->values[counts].layout);
  Emit e = s.emit_at(0);
  ir::ValueId scaled = append(e, OpKind::Scale, {counts}, {AttrValue::real("factor", factor)}, counts_layout);
  const ir::TensorType local = type_of(s.in(0));  // a copy: appends may grow the type table
  const std::vector<int64_t> shape(local.shape().begin(), local.shape().end());
  ir::ValueId grad =
      append(e, OpKind::Expand, {scaled},
             {AttrValue::ints("shape", shape), AttrValue::ints("dims", balance_dims(s.lop, local.rank, per_sequence))},
             layout);
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
        if (s.lop.attrs.real("aux_loss") > 0) s.give(0, load_balancing_grad(s, false));
        if (s.lop.attrs.real("seq_aux_loss") > 0) s.give(0, load_balancing_grad(s, true));
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
