// Attention: the forward op, and one fused grad op for q, k and v.
// One family's rules; autodiff.cpp picks the family from the op table.
#include <array>

#include <fmt/format.h>

#include "compiler/lowering/lowering_helpers.h"

namespace dstc::compiler {

ir::ValueId Lowering::forward_attention(const ForwardStep& f) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (f.lop.type) {
    case ops::OpKind::Attention: {
      if (!spec.train.kv_cache)
        return append(f.at, OpKind::Attention, {f.in[0], f.in[1], f.in[2]},
                      {AttrValue::boolean("causal", f.lop.attrs.boolean("causal"))}, f.out);
      const ir::ValueId keys = kv_cache_arg(f, 1), values = kv_cache_arg(f, 2);
      const std::vector<AttrValue> attrs{AttrValue::boolean("causal", f.lop.attrs.boolean("causal")),
                                         AttrValue::integer("context", spec.train.context)};
      // Where memory(cache) split the cache: over ranks that split the
      // queries' sequence (a context-parallel prefill) each stores its
      // shard, attending over the gathered keys; over ranks holding the same
      // queries each attends over its shard (the planner allows no mix).
      const ir::Layout& cache = module_.layout(function_->values[keys].layout);
      const ir::Layout& step = module_.layout(function_->values[f.in[1]].layout);
      const ir::Layout& queries = module_.layout(function_->values[f.in[0]].layout);
      int64_t stored_shards = 1;
      bool shared_queries = false;
      for (size_t a = 0; a < cache.size(); ++a) {
        if (cache[a] == step[a]) continue;
        if (queries[a] != ir::Sbp{ir::Sbp::Split, 2}) {
          shared_queries = true;
          continue;
        }
        stored_shards *= module_.axis_range(function_->values[keys].devices, static_cast<int>(a)).size();
      }
      if (shared_queries) return attend_over_cache_shards(f, keys, values, attrs);
      if (stored_shards == 1)
        return append(f.at, OpKind::Attention, {f.in[0], f.in[1], f.in[2], keys, values}, {attrs[0], attrs[1]}, f.out);
      return append(f.at, OpKind::Attention, {f.in[0], f.in[1], f.in[2], keys, values},
                    {attrs[0], attrs[1], AttrValue::integer("cache_shards", stored_shards)}, f.out);
    }
    default: no_forward_lowering(f.lop);
  }
}

// Decode context parallelism (vLLM's DCP, TensorRT-LLM's Helix): the cache
// split by position over axes whose ranks hold the same queries. Each rank
// attends over its shard; the shards' states, stacked along a new dim 0
// split over those axes, are gathered in one exchange and merged.
ir::ValueId Lowering::attend_over_cache_shards(const ForwardStep& f, ir::ValueId keys, ir::ValueId values,
                                               std::span<const ir::AttrValue> attrs) {
  const ir::Layout& cache = module_.layout(function_->values[keys].layout);
  const ir::Layout& step = module_.layout(function_->values[f.in[1]].layout);
  ir::Layout shards = f.out, merged = f.out;
  for (size_t a = 0; a < shards.size(); ++a) {
    if (cache[a] != step[a]) {
      shards[a] = {ir::Sbp::Split, 0};
    } else if (shards[a].kind == ir::Sbp::Split) {
      ++shards[a].dim;
    }
    merged[a] = shards[a].kind == ir::Sbp::Split && shards[a].dim == 0 ? ir::Sbp{} : shards[a];
  }
  const std::array<ir::ValueId, 5> operands{f.in[0], f.in[1], f.in[2], keys, values};
  const std::array<ir::Layout, 2> layouts{shards, shards};
  std::vector<ir::ValueId> states = append_multi(f.at, ir::OpKind::AttentionPart, operands, attrs, layouts);
  std::vector<ir::ValueId> all = box_group(f.at, states, shards, merged, true);
  return append(f.at, ir::OpKind::AttentionMerge, {all[0], all[1]}, {}, f.out);
}

// The cache of attention operand `i` (k or v) for one micro-batch: held
// across steps, laid out as the step's k or v, with room for the context
// and this step's positions. Its values are the batch's sequences' earlier
// keys or values, so executors draw it as data of the batch
// (ir::InputData), the same whichever way a strategy splits it. Where
// `memory(cache)` splits its positions over axes, the room is rounded up to
// a multiple of their ranks, each holding an equal run of positions.
ir::ValueId Lowering::kv_cache_arg(const ForwardStep& f, size_t i) {
  const Tensor& step = graph.tensors[f.lop.inputs[i].tensor];
  const ir::Value& value = function_->values[f.in[i]];
  ir::TensorType type = type_of(f.in[i]);
  const int positions = type.rank - 2;
  ir::Layout layout = module_.layout(value.layout);
  int64_t shards = 1;
  if (const std::optional<TensorLayoutConfig>& split = spec.cache[static_cast<size_t>(f.lop.node)]) {
    for (size_t a = 0; a < layout.size(); ++a) {
      const int32_t ranks = module_.axis_range(value.devices, static_cast<int>(a)).size();
      if (!(split->written >> a & 1u) || split->layout[a].kind != ir::Sbp::Split || ranks == 1) continue;
      layout[a] = {ir::Sbp::Split, static_cast<uint8_t>(positions)};
      shards *= ranks;
    }
  }
  const int64_t held = type.dims[positions] + spec.train.context;
  type.dims[positions] = (held + shards - 1) / shards;
  const bool micro_batched = resolved.batch_splits > 1;
  std::string data = step.name + ".cache";
  ir::InputData input;
  input.data = module_.intern(data);
  input.batch_axis = step.batch_axis;
  input.micro_batch = micro_batched ? f.at.micro_batch : -1;
  input.micro_batches = resolved.batch_splits;
  return builder().add_arg(micro_batched ? fmt::format("{}.mb{}", data, f.at.micro_batch) : data, ir::ArgKind::Cache,
                           type, value.devices, module_.intern_layout(layout), input);
}

void Lowering::backward_attention(BackwardStep& s) {
  using ir::AttrValue;
  using ir::OpKind;
  switch (s.lop.type) {
    case ops::OpKind::Attention:
      if (s.wanted(0) || s.wanted(1) || s.wanted(2)) {
        std::vector<ir::ValueId> operands{s.g, s.in(0), s.in(1), s.in(2)};
        std::vector<AttrValue> attrs{AttrValue::boolean("causal", s.lop.attrs.boolean("causal"))};
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
