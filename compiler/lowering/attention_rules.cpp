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
        for (size_t i = 0; i < 3; ++i)
          if (s.wanted(i)) s.give(i, r[i]);
      }
      break;
    default: no_backward_rule(s.lop);
  }
}

}  // namespace dstc::compiler
