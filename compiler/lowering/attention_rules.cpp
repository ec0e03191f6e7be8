// Attention: the forward op, and one fused grad op for q, k and v.
// One family's rules; autodiff.cpp picks the family from the op table.
#include <fmt/format.h>

#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_attention(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Attention:
      if (spec.train.kv_cache) {
        return append(f.at, OpKind::Attention, {f.in[0], f.in[1], f.in[2], kv_cache_arg(f, 1), kv_cache_arg(f, 2)},
                      {AttrValue::boolean("causal", f.lop.causal), AttrValue::integer("context", spec.train.context)},
                      f.out);
      }
      return append(f.at, OpKind::Attention, {f.in[0], f.in[1], f.in[2]}, {AttrValue::boolean("causal", f.lop.causal)},
                    f.out);
    default: no_forward_lowering(f.lop);
  }
}

// The cache of attention operand `i` (k or v) for one micro-batch: held
// across steps, laid out as the step's k or v, with room for the context
// and this step's positions. Its values are the batch's sequences' earlier
// keys or values, so executors draw it as data of the batch
// (ir::InputData), the same whichever way a strategy splits it.
ir::ValueId Lowering::kv_cache_arg(const ForwardStep& f, size_t i) {
  const Tensor& step = graph.tensors[f.lop.inputs[i].tensor];
  const ir::Value& value = function_->values[f.in[i]];
  ir::TensorType type = type_of(f.in[i]);
  type.dims[type.rank - 2] += spec.train.context;
  const bool micro_batched = resolved.batch_splits > 1;
  std::string data = step.name + ".cache";
  ir::InputData input;
  input.data = module_.intern(data);
  input.batch_axis = step.batch_axis;
  input.micro_batch = micro_batched ? f.at.micro_batch : -1;
  input.micro_batches = resolved.batch_splits;
  return builder().add_arg(micro_batched ? fmt::format("{}.mb{}", data, f.at.micro_batch) : data, ir::ArgKind::Cache,
                           type, value.devices, value.layout, input);
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
        if (s.wanted(0)) s.give(0, r[0]);
        if (s.wanted(1) && s.wanted(2) && ring_returns_key_value_grads(s, r[1], r[2])) break;
        for (size_t i = 1; i < 3; ++i)
          if (s.wanted(i)) s.give(i, r[i]);
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

// Ring attention (cp_comm_type = p2p) sends the keys' and values'
// gradients back around the ring together, one message per step, as
// Transformer Engine does: where both go back to the same layout, they are
// reduce-scattered as one grouped collective here, which the simulator
// pipelines with the gradient op, instead of each when its producer's
// backward reads it.
bool Lowering::ring_returns_key_value_grads(BackwardStep& s, ir::ValueId dk, ir::ValueId dv) {
  if (spec.train.cp_exchange != ContextParallelExchange::Ring) return false;
  const ir::Layout& stored = sbp.layouts[s.lop.inputs[1].tensor];
  if (stored != sbp.layouts[s.lop.inputs[2].tensor] || s.grad_layout_of(1) != s.grad_layout_of(2)) return false;
  const ir::Layout target = dual_layout(stored);
  Emit at = s.emit_at(1);
  at.stream = ir::Stream::Feature;
  std::vector<ir::ValueId> back = box_group(at, {dk, dv}, s.grad_layout_of(1), target);
  const ir::LayoutId layout = module_.intern_layout(target);
  s.give(1, back[0], layout);
  s.give(2, back[1], layout);
  return true;
}

}  // namespace dstc::compiler
