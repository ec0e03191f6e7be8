// Parameters in the lowering: their stored copies, the value each stage
// computes with, gradient accumulation and synchronisation, the exchange
// between copies of a parameter shared across pipeline stages, and the
// optimizer step.
#include <algorithm>

#include "compiler/lowering/lowering_state.h"
#include "ir/replica_names.h"

namespace dstc::compiler {

void Lowering::create_parameters() {
  param_copies_.resize(graph.tensors.size());
  const bool adam = spec.train.training && spec.train.optimizer == Optimizer::Adam;
  // The weights are stored in the precision the step computes in. Training
  // in a lower precision keeps an fp32 master copy with the optimizer state
  // (Megatron's mixed-precision optimizer, DeepSpeed's ZeRO): laid out as
  // the state, so ZeRO-1 and the distributed optimizer shard it too, and
  // the updated weights are cast down before they are gathered.
  const ir::DType stored = spec.train.precision;
  const bool master = spec.train.training && stored != ir::DType::F32 && spec.train.master_weights;
  // Serving in FP8: a weight only FP8 GEMMs read is stored in e4m3, as
  // FP8 checkpoints are quantized once, offline (vLLM's and TensorRT-LLM's
  // fp8, Meta's row-wise FP8 Llama 3 405B), not each step.
  std::vector<uint8_t> fp8_weight(graph.tensors.size(), 0);
  if (!spec.train.training && spec.train.fp8 != Fp8Recipe::None) {
    std::vector<uint8_t> other_reader(graph.tensors.size(), 0);
    for (int32_t op = 0; op < static_cast<int32_t>(graph.ops.size()); ++op)
      for (const Operand& in : graph.ops[op].inputs) (fp8_op(op) ? fp8_weight : other_reader)[in.tensor] = 1;
    for (size_t t = 0; t < fp8_weight.size(); ++t) fp8_weight[t] &= !other_reader[t];
  }
  // Without a master copy (pure half-precision training) the optimizer
  // state is kept in the weights' precision too.
  const ir::DType state_dtype = master ? ir::DType::F32 : stored;
  // Per stage and tensor: the stage's first op that reads it (one pass over
  // each stage's ops, not one per parameter).
  std::vector<std::vector<int32_t>> first_reader(stage_ops_.size());
  for (size_t stage = 0; stage < stage_ops_.size(); ++stage) {
    first_reader[stage].assign(graph.tensors.size(), -1);
    for (int32_t op : stage_ops_[stage]) {
      for (const Operand& in : graph.ops[op].inputs) {
        if (first_reader[stage][in.tensor] < 0) first_reader[stage][in.tensor] = op;
      }
    }
  }
  for (int32_t t = 0; t < static_cast<int32_t>(graph.tensors.size()); ++t) {
    const Tensor& tensor = graph.tensors[t];
    if (tensor.kind != TensorKind::Param) continue;
    // The distributed optimizer's weights (state sharded where the weight
    // is not) under overlap_param_gather: between steps each rank holds
    // its updated shard, and the step gathers it before its first use, as
    // Megatron-Core's --overlap-param-gather does during the next forward.
    const bool gathered_at_use = spec.train.training && tensor.trainable && spec.train.overlap_param_gather &&
                                 optimizer_layout(t) != param_layout(t);
    // One copy per device set that reads it; stages of an interleaved
    // pipeline on the same devices share theirs.
    std::vector<ParamCopy>& copies = param_copies_[t];
    for (int32_t stage : consumer_stages_[t]) {
      auto same = std::find_if(copies.begin(), copies.end(),
                               [&](const ParamCopy& c) { return c.devices == stage_devices_[stage]; });
      if (same != copies.end()) {
        same->stages.push_back(stage);
        continue;
      }
      ParamCopy copy;
      copy.devices = stage_devices_[stage];
      copy.stages = {stage};
      // A buffer has no gradient to bring back: each stage stores its own.
      copy.stored = copies.empty() || spec.memory[t].sharing == ParamSharing::Replicate || !tensor.trainable;
      copies.push_back(copy);
    }
    for (ParamCopy& copy : copies) {
      if (!copy.stored) continue;
      std::string name = &copy == &copies.front() ? tensor.name : ir::replica_name(tensor.name, copy.stages.front());
      copy.gathered_at_use = gathered_at_use;
      copy.value = add_stored_arg(name, ir::ArgKind::Param, t, gathered_at_use ? optimizer_layout(t) : param_layout(t),
                                  fp8_weight[t] ? ir::DType::F8E4M3 : stored, copy.devices);
      if (!tensor.trainable) continue;
      ir::Layout state = optimizer_layout(t);
      if (master)
        copy.master = add_stored_arg(ir::master_name(name), ir::ArgKind::State, t, state, state_dtype, copy.devices);
      if (!adam) continue;
      copy.adam_m = add_stored_arg(name + ".adam_m", ir::ArgKind::State, t, state, state_dtype, copy.devices);
      copy.adam_v = add_stored_arg(name + ".adam_v", ir::ArgKind::State, t, state, state_dtype, copy.devices);
    }
    for (ParamCopy& copy : copies) {
      for (int32_t stage : copy.stages) {
        stage_params_[stage].push_back(t);
        copy.first_readers.push_back(first_reader[static_cast<size_t>(stage)][t]);
      }
    }
  }
}

Lowering::ParamCopy& Lowering::param_copy(int32_t t, int32_t stage) {
  for (ParamCopy& copy : param_copies_[t])
    if (copy.devices == stage_devices_[stage]) return copy;
  return param_copies_[t].front();  // unreachable: every reading stage has a copy
}

ir::ValueId Lowering::param_value(int32_t t, const Emit& at) {
  ParamCopy& copy = param_copy(t, at.stage);
  if (copy.compute_value != ir::kNone) return copy.compute_value;
  if (!copy.stored) {
    // Transmitted: the owner sends its compute copy once per step.
    ParamCopy& owner = param_copies_[t].front();
    Emit from = at;
    from.stage = owner.stages.front();
    ir::ValueId v = param_value(t, from);
    return copy.compute_value = transfer(v, from, at.stage, ir::Phase::Forward, graph.tensors[t].where);
  }
  // Stored in the compute precision (create_parameters); a gathered
  // parameter (ZeRO-3) is gathered in it at each use, the distributed
  // optimizer's shard once, for every use in the step.
  if (copy.gathered_at_use) {
    // On the data-parallel stream, as Megatron-Core's, not behind the
    // activations' exchanges; into the full parameter buffer the shard is
    // part of.
    Emit gather = at;
    gather.stream = ir::Stream::Grad;
    gather.tensor = t;
    gather.in_place = true;
    return copy.compute_value = box(gather, copy.value, optimizer_layout(t), param_layout(t), false);
  }
  return copy.compute_value = copy.value;
}

ir::ValueId Lowering::transfer(ir::ValueId v, const Emit& from, int32_t to_stage, ir::Phase phase, SourceRange where) {
  uint32_t channel = next_channel_++;
  ir::OpSpec send;
  send.kind = ir::OpKind::Send;
  send.devices = stage_devices_[from.stage];
  send.peer = stage_devices_[to_stage];
  send.channel = channel;
  send.operands = std::span<const ir::ValueId>(&v, 1);
  send.meta = {ir::Stream::Pipeline, phase, static_cast<int16_t>(from.stage), from.micro_batch, loc_of(where)};
  builder().append(send);
  const ir::Value& value = function_->values[v];
  ir::TypeId type = value.type;
  ir::LayoutId layout = value.layout;
  ir::OpSpec recv;
  recv.kind = ir::OpKind::Recv;
  recv.devices = stage_devices_[to_stage];
  recv.peer = stage_devices_[from.stage];
  recv.channel = channel;
  recv.meta = {ir::Stream::Pipeline, phase, static_cast<int16_t>(to_stage), from.micro_batch, loc_of(where)};
  recv.result_types = std::span<const ir::TypeId>(&type, 1);
  recv.result_layouts = std::span<const ir::LayoutId>(&layout, 1);
  ir::TypeId logical = value.logical;
  ir::ValueId received = builder().append_value(recv);
  function_->values[received].logical = logical;
  return received;
}

int32_t Lowering::first_reader(int32_t t, int32_t stage) {
  const ParamCopy& copy = param_copy(t, stage);
  for (size_t i = 0; i < copy.stages.size(); ++i)
    if (copy.stages[i] == stage) return copy.first_readers[i];
  return -1;
}

void Lowering::flush_param_grads(int32_t stage, int32_t mb) {
  for (int32_t t : stage_params_[stage]) flush_param_grad(t, stage, mb);
}

void Lowering::flush_param_grad(int32_t t, int32_t stage, int32_t mb) {
  accumulate_param_grad(t, stage, mb);
  // The last micro-batch's gradient is in: reduce it into the optimizer
  // layout now, so the data-parallel reduction overlaps the rest of the
  // backward and a rank's reductions queue in the order their gradients
  // complete.
  ParamCopy& copy = param_copy(t, stage);
  bool last = std::all_of(copy.stages.begin(), copy.stages.end(), [&](int32_t s) {
    return weight_blocks_done_[s] == resolved.micro_batches - (s == stage ? 1 : 0);
  });
  if (spec.train.overlap_grad_reduce && last) sync_param_grad(t, stage);
}

void Lowering::sync_param_grad(int32_t t, int32_t stage) {
  ParamCopy& copy = param_copy(t, stage);
  if (copy.grad == ir::kNone || copy.synced) return;
  copy.synced = true;
  const ir::Layout from = grad_layout(t), to = optimizer_layout(t);
  if (from == to) return;
  const ir::TensorType& type = module_.value_type(*function_, copy.grad);
  if (grad_buckets_.empty()) grad_buckets_.resize(stage_ops_.size());
  std::vector<GradBucket>& open = grad_buckets_[stage];
  GradBucket key{module_.intern_layout(from), module_.intern_layout(to), type.dtype, 0, 0, {}};
  auto it = std::find_if(open.begin(), open.end(), [&](const GradBucket& b) {
    return b.from == key.from && b.to == key.to && b.dtype == key.dtype;
  });
  if (it == open.end()) {
    // Megatron-Core's default: max(40M, 1M x the group reduced over)
    // parameters, larger groups needing larger buckets to stay off the
    // latency floor.
    int64_t group = 1;
    for (size_t a = 0; a < from.size(); ++a) {
      bool reduced = from[a].kind == ir::Sbp::PartialSum || from[a].kind == ir::Sbp::PartialMax;
      if (reduced && to[a].kind != from[a].kind) group *= spec.mesh.axes()[a].size;
    }
    key.capacity = spec.train.grad_bucket.value_or(std::max<int64_t>(40'000'000, 1'000'000 * group));
    it = open.insert(open.end(), key);
  }
  it->params.push_back(t);
  it->elements += type.numel();
  if (it->elements >= it->capacity) flush_grad_bucket(stage, static_cast<size_t>(it - open.begin()));
}

void Lowering::flush_grad_bucket(int32_t stage, size_t bucket) {
  GradBucket b = std::move(grad_buckets_[stage][bucket]);
  grad_buckets_[stage].erase(grad_buckets_[stage].begin() + static_cast<std::ptrdiff_t>(bucket));
  std::vector<ir::ValueId> grads;
  for (int32_t t : b.params) grads.push_back(param_copy(t, stage).grad);
  const Tensor& last = graph.tensors[b.params.back()];
  Emit at{stage, -1, ir::Phase::WeightGrad, ir::Stream::Grad, last.where, last.node};
  grads = box_group(at, std::move(grads), module_.layout(b.from), module_.layout(b.to));
  for (size_t i = 0; i < b.params.size(); ++i) param_copy(b.params[i], stage).grad = grads[i];
}

void Lowering::flush_grad_buckets(int32_t stage) {
  while (!grad_buckets_.empty() && !grad_buckets_[stage].empty()) flush_grad_bucket(stage, 0);
}

void Lowering::sync_param_grads_after_backward(int32_t stage) {
  // Without overlap every reduction waits for the stage's whole backward:
  // the first queued is of the stage's first parameter in forward order,
  // whose gradient completes last, and the grad stream runs in order.
  for (int32_t t : stage_params_[stage]) {
    const ParamCopy& copy = param_copy(t, stage);
    bool done = std::all_of(copy.stages.begin(), copy.stages.end(),
                            [&](int32_t s) { return weight_blocks_done_[s] == resolved.micro_batches; });
    if (done) sync_param_grad(t, stage);
  }
}

void Lowering::accumulate_param_grad(int32_t t, int32_t stage, int32_t mb) {
  ir::ValueId& grad = param_copy(t, stage).grad;
  Emit sync{stage, mb, ir::Phase::WeightGrad, ir::Stream::Grad, graph.tensors[t].where, graph.tensors[t].node};
  if (grad != ir::kNone) {
    // Megatron's gradient-accumulation fusion: a low-precision gradient
    // already in the gradient layout is added into the fp32 accumulator
    // directly, with no cast op in between.
    auto& pending = pending_grads_[mb];
    auto it = pending.lower_bound({t, 0});
    bool single = it != pending.end() && it->first.first == t &&
                  (std::next(it) == pending.end() || std::next(it)->first.first != t);
    if (single && module_.layout(it->first.second) == grad_layout(t)) {
      sync.stream = ir::Stream::Compute;
      grad = append(sync, ir::OpKind::Accumulate, {grad, it->second}, {}, grad_layout(t));
      pending.erase(it);
      return;
    }
  }
  ir::ValueId g = flush_grads(t, mb, grad_layout(t), spec.train.grad_precision, sync);
  if (g == ir::kNone) return;
  if (grad == ir::kNone) {
    grad = g;
  } else {
    sync.stream = ir::Stream::Compute;
    grad = append(sync, ir::OpKind::Accumulate, {grad, g}, {}, grad_layout(t));
  }
}

void Lowering::sum_shared_param_grads() {
  for (int32_t t = 0; t < static_cast<int32_t>(graph.tensors.size()); ++t) {
    std::vector<ParamCopy>& copies = param_copies_[t];
    if (copies.size() < 2) continue;
    const SourceRange where = graph.tensors[t].where;
    // What each copy holds of every copy's gradient, then the sum in copy
    // order, so every stored copy computes the same bits.
    std::vector<std::vector<ir::ValueId>> held(copies.size(), std::vector<ir::ValueId>(copies.size(), ir::kNone));
    for (size_t i = 0; i < copies.size(); ++i) {
      held[i][i] = copies[i].grad;
      if (copies[i].grad == ir::kNone) continue;
      Emit from{copies[i].stages.front(), -1, ir::Phase::WeightGrad, ir::Stream::Pipeline, where};
      for (size_t j = 0; j < copies.size(); ++j)
        if (j != i && copies[j].stored)
          held[j][i] = transfer(copies[i].grad, from, copies[j].stages.front(), ir::Phase::WeightGrad, where);
    }
    for (size_t j = 0; j < copies.size(); ++j) {
      if (!copies[j].stored) continue;
      Emit at{copies[j].stages.front(), -1, ir::Phase::WeightGrad, ir::Stream::Compute, where};
      ir::ValueId total = ir::kNone;
      for (ir::ValueId g : held[j]) {
        if (g == ir::kNone) continue;
        total = total == ir::kNone ? g : append(at, ir::OpKind::Add, {total, g}, {}, optimizer_layout(t));
      }
      copies[j].grad = total;
    }
  }
}

void Lowering::emit_optimizer(int32_t stage) {
  std::vector<ir::ValueId> returns;
  for (int32_t t : stage_params_[stage]) {
    const ParamCopy& copy = param_copy(t, stage);
    if (!copy.stored || copy.stages.front() != stage || copy.grad == ir::kNone) continue;
    Emit at{stage, -1, ir::Phase::Optimizer, ir::Stream::Compute, graph.tensors[t].where, graph.tensors[t].node};
    ir::Layout state = optimizer_layout(t);
    ir::ValueId w = copy.master != ir::kNone ? copy.master
                    : copy.gathered_at_use   ? copy.value
                                             : box(at, copy.value, param_layout(t), state);
    double lr = spec.train.learning_rate;
    ir::ValueId updated;
    if (spec.train.optimizer == Optimizer::Adam) {
      std::vector<ir::ValueId> operands{w, copy.grad, copy.adam_m, copy.adam_v};
      std::vector<ir::AttrValue> attrs{ir::AttrValue::real("lr", lr)};
      std::vector<ir::Layout> layouts{state, state, state};
      std::vector<ir::ValueId> out = append_multi(at, ir::OpKind::Adam, operands, attrs, layouts);
      updated = out[0];
      returns.push_back(out[1]);
      returns.push_back(out[2]);
    } else {
      updated = append(at, ir::OpKind::Sgd, {w, copy.grad}, {ir::AttrValue::real("lr", lr)}, state);
    }
    if (copy.master != ir::kNone) {
      returns.push_back(updated);
      updated = append(at, ir::OpKind::Cast, {updated},
                       {ir::AttrValue::string("dtype", ir::dtype_name(spec.train.precision))}, state);
    }
    if (copy.gathered_at_use) {
      returns.push_back(updated);  // the next step gathers it
      continue;
    }
    Emit gather = at;
    gather.stream = ir::Stream::Grad;
    returns.push_back(box(gather, updated, state, param_layout(t)));
  }
  function_->returns.insert(function_->returns.end(), returns.begin(), returns.end());
}

}  // namespace dstc::compiler
