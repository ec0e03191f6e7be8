#include "compiler/lowering/lowering.h"

#include <algorithm>
#include <array>
#include <map>

#include <fmt/format.h>

#include "compiler/lowering/all_to_all_overlap.h"
#include "compiler/lowering/lowering_helpers.h"
#include "compiler/lowering/lowering_state.h"
#include "compiler/ops/routing_load.h"
#include "compiler/sbp/signature.h"
#include "compiler/schedule/schedule_check.h"
#include "ir/groups.h"

namespace dstc::compiler {
namespace {

// Moves each send to just before its recv. The op list is a sequential
// execution of the step; with every send next to its recv, each rendezvous
// completes in that sequence, so the per-device orders derived from it
// cannot deadlock (1F1B's steady state, where one stage sends forward while
// the next sends back, would otherwise cross). Sends have no results, so
// only the definitions of other ops' results move with the renumbering.
// In place: a send only moves later, so no op is written past where it is
// read (the op list of a large model is a hundred megabytes).
void place_sends_at_their_recvs(ir::Function& f) {
  std::map<uint32_t, ir::Op> waiting;  // channel -> send
  size_t placed = 0;
  for (size_t read = 0; read < f.ops.size(); ++read) {
    ir::Op op = f.ops[read];
    if (op.kind == ir::OpKind::Send) {
      waiting.emplace(op.channel, op);
      continue;
    }
    if (op.kind == ir::OpKind::Recv) {
      auto send = waiting.find(op.channel);
      if (send != waiting.end()) {
        f.ops[placed++] = send->second;
        waiting.erase(send);
      }
    }
    f.ops[placed++] = op;
  }
  for (auto& [channel, send] : waiting) f.ops[placed++] = send;  // unmatched: the verifier reports them
  for (ir::OpId id = 0; id < f.ops.size(); ++id) {
    const ir::Op& op = f.ops[id];
    for (int i = 0; i < op.result_count; ++i) f.values[op.first_result + i].def = id;
  }
}

// A schedule repeats each (stage, action) block once per micro-batch with
// the same ops. Once every kind of block has been emitted once, the
// function's final size is forecast from them and its vectors reserved
// (with a margin; reserved memory nobody touches costs nothing), so the
// op list of a large model is not copied each time it doubles.
class FunctionSizeForecast {
 public:
  void expect(int32_t stage, schedule::ActionKind kind) { ++blocks_[{stage, kind}].count; }
  void begin(const ir::Function& f) { before_ = sizes(f); }
  void end(ir::Function& f, int32_t stage, schedule::ActionKind kind) {
    if (reserved_) return;
    Block& block = blocks_[{stage, kind}];
    ++block.done;
    if (block.done == 1) {
      Sizes after = sizes(f);
      for (size_t i = 0; i < block.size.size(); ++i) block.size[i] = after[i] - before_[i];
      ++measured_;
    }
    if (measured_ < blocks_.size()) return;
    reserved_ = true;
    Sizes total = sizes(f);
    for (const auto& [key, b] : blocks_) {
      for (size_t i = 0; i < total.size(); ++i) total[i] += b.size[i] * (b.count - b.done);
    }
    f.ops.reserve(total[0] * 5 / 4);
    f.values.reserve(total[1] * 5 / 4);
    f.operand_pool.reserve(total[2] * 5 / 4);
    f.attr_pool.reserve(total[3] * 5 / 4);
    f.int_pool.reserve(total[4] * 5 / 4);
  }

 private:
  using Sizes = std::array<size_t, 5>;
  struct Block {
    size_t count = 0;  // in the schedule
    size_t done = 0;
    Sizes size{};  // what the first one emitted
  };
  static Sizes sizes(const ir::Function& f) {
    return {f.ops.size(), f.values.size(), f.operand_pool.size(), f.attr_pool.size(), f.int_pool.size()};
  }
  size_t measured_ = 0;
  bool reserved_ = false;
  Sizes before_{};
  std::map<std::pair<int32_t, schedule::ActionKind>, Block> blocks_;
};

// The values an integer data input takes: the rows of the embedding it
// indexes or the classes of the cross-entropy it labels (else 0 and 1);
// 0 for float data.
int64_t input_values(const LogicalGraph& graph, int32_t tensor) {
  if (ir::is_float(graph.tensors[tensor].dtype)) return 0;
  for (const LogicalOp& op : graph.ops) {
    if (op.inputs.size() < 2 || op.inputs[1].tensor != tensor) continue;
    const Tensor& first = graph.tensors[op.inputs[0].tensor];
    if (op.type == ops::OpKind::Embedding && !first.dims.empty()) return first.dims[0].size;
    if (op.type == ops::OpKind::CrossEntropy && !first.dims.empty()) return first.dims.back().size;
  }
  return 2;
}

}  // namespace

Lowering::Lowering(const LogicalGraph& g, const StrategySpec& s, const SbpAssignment& a, const ResolvedStrategy& r,
                   const SourceManager& sources)
    : graph(g), spec(s), sbp(a), resolved(r), sources_(sources) {
  module_.set_mesh(spec.mesh);
  stage_ops_.resize(resolved.num_stages);
  for (int32_t op = 0; op < static_cast<int32_t>(graph.ops.size()); ++op)
    stage_ops_[resolved.stage_of_op[op]].push_back(op);
  consumer_stages_.resize(graph.tensors.size());
  for (int32_t op = 0; op < static_cast<int32_t>(graph.ops.size()); ++op) {
    for (const Operand& in : graph.ops[op].inputs) {
      auto& stages = consumer_stages_[in.tensor];
      int32_t st = resolved.stage_of_op[op];
      if (std::find(stages.begin(), stages.end(), st) == stages.end()) stages.push_back(st);
    }
  }
  // A tensor needs a gradient when a parameter flows into it.
  requires_grad_.assign(graph.tensors.size(), false);
  if (spec.train.training) {
    for (size_t t = 0; t < graph.tensors.size(); ++t)
      requires_grad_[t] = graph.tensors[t].kind == TensorKind::Param && graph.tensors[t].trainable;
    for (const LogicalOp& op : graph.ops)
      for (const Operand& in : op.inputs)
        if (requires_grad_[in.tensor]) requires_grad_[op.output] = true;
  }
  // Stage k runs on the pipeline axis' coordinate the schedule places it at.
  for (int32_t k = 0; k < resolved.num_stages; ++k) {
    ir::DeviceSet set = ir::DeviceSet::whole(spec.mesh);
    if (spec.pipeline.axis >= 0) {
      int32_t coord = resolved.table.rank_of_stage(k);
      set.ranges[spec.pipeline.axis] = {coord, coord + 1};
    }
    stage_devices_.push_back(module_.intern_devices(set));
  }
  weight_blocks_done_.assign(resolved.num_stages, 0);
  stage_params_.resize(resolved.num_stages);
  for (int32_t op = 0; op < static_cast<int32_t>(graph.ops.size()); ++op) {
    input_base_.push_back(input_layouts_.size());
    for (size_t i = 0; i < graph.ops[op].inputs.size(); ++i) {
      ir::Layout l;
      for (const AxisSignature& axis : sbp.ops[op].axes) l.push_back(axis.inputs[i]);
      input_layouts_.push_back(std::move(l));
    }
    ir::Layout out;
    for (const AxisSignature& axis : sbp.ops[op].axes) out.push_back(axis.output);
    output_layouts_.push_back(std::move(out));
  }
  if (spec.train.fp8 != Fp8Recipe::None) mark_fp8_ops();
  int32_t mbs = resolved.micro_batches;
  forward_.reset(graph.tensors.size(), mbs);
  recomputed_.reset(graph.tensors.size(), mbs);
  grads_.reset(graph.tensors.size(), mbs);
  saved_inputs_.reset(input_layouts_.size(), mbs);
  saved_outputs_.reset(graph.ops.size(), mbs);
  grad_outputs_.reset(graph.ops.size(), mbs);
  pending_grads_.resize(mbs);
}

// --- layouts and types ---

ir::Layout Lowering::dual_layout(const ir::Layout& layout) const {
  ir::Layout d;
  for (size_t a = 0; a < layout.size(); ++a)
    d.push_back(static_cast<int>(a) == spec.pipeline.axis ? layout[a] : dual(layout[a]));
  return d;
}

ir::Layout Lowering::param_layout(int32_t t) const { return sbp.layouts[t]; }

ir::Layout Lowering::grad_layout(int32_t t) const { return sbp.grad_layouts[t]; }

ir::Layout Lowering::optimizer_layout(int32_t t) const { return sbp.optimizer_layouts[t]; }

ir::TensorType Lowering::local_type(int32_t tensor, const ir::Layout& layout, ir::DType dtype) const {
  const Tensor& t = graph.tensors[tensor];
  std::vector<int64_t> dims;
  for (const Dim& d : t.dims) dims.push_back(d.size);
  if (t.batch_axis >= 0) dims[t.batch_axis] /= resolved.batch_splits;
  for (size_t a = 0; a < layout.size(); ++a)
    if (layout[a].kind == ir::Sbp::Split) dims[layout[a].dim] /= spec.mesh.axes()[a].size;
  if (ir::flat_axis(layout) >= 0) {
    int64_t block = 1, parts = 1;
    for (int64_t d : dims) block *= d;
    for (size_t a = 0; a < layout.size(); ++a)
      if (layout[a].kind == ir::Sbp::Flat) parts *= spec.mesh.axes()[a].size;
    return ir::TensorType(dtype, {ir::flat_chunk(block, parts)});
  }
  return ir::TensorType(dtype, dims);
}

ir::ValueId Lowering::add_stored_arg(std::string_view name, ir::ArgKind kind, int32_t t, const ir::Layout& layout,
                                     ir::DType dtype, ir::DeviceSetId devices) {
  ir::ValueId v = builder().add_arg(name, kind, local_type(t, layout, dtype), devices, module_.intern_layout(layout));
  if (ir::flat_axis(layout) >= 0) {
    std::vector<int64_t> dims;
    for (const Dim& d : graph.tensors[t].dims) dims.push_back(d.size);
    builder().set_logical_type(v, ir::TensorType(dtype, dims));
  }
  return v;
}

ir::DType Lowering::compute_dtype(int32_t tensor) const {
  const Tensor& t = graph.tensors[tensor];
  return ir::is_float(t.dtype) ? spec.train.precision : t.dtype;
}

int Lowering::vocab_split_axis(int32_t op) const {
  for (size_t a = 0; a < sbp.ops[op].axes.size(); ++a) {
    ir::Sbp table = sbp.ops[op].axes[a].inputs[0];
    if (table.kind == ir::Sbp::Split && table.dim == 0) return static_cast<int>(a);
  }
  return -1;
}

ir::LocId Lowering::loc_of(SourceRange where, int32_t node) {
  if (!where.valid()) return ir::kNoLoc;
  // File ids fit 16 bits, offsets 24 (a .dstrat file is at most 4 MiB),
  // nodes + 1 24 (a model has at most 2^18).
  uint64_t key = (uint64_t{where.file} << 48) | (static_cast<uint64_t>(node + 1) << 24) | where.begin;
  auto [it, inserted] = locs_.try_emplace(key, ir::kNoLoc);
  if (inserted) {
    LineCol lc = sources_.line_col(where.file, where.begin);
    ir::StrId scope = node > 0 ? module_.intern(graph.nodes[static_cast<size_t>(node)].path) : 0;
    it->second = module_.intern_loc({module_.intern(sources_.file(where.file).path), lc.line, lc.column, scope});
  }
  return it->second;
}

// --- emitting ops ---

ir::OpId Lowering::append_op(const Emit& at, ir::OpKind kind, std::span<const ir::ValueId> operands,
                             std::span<const ir::AttrValue> attrs, std::span<const ir::Layout> layouts) {
  layout_ids_.clear();
  for (const ir::Layout& l : layouts) layout_ids_.push_back(module_.intern_layout(l));
  ir::OpSpec op;
  op.kind = kind;
  op.devices = stage_devices_[at.stage];
  op.operands = operands;
  op.attrs = attrs;
  op.meta = {at.stream, at.phase, static_cast<int16_t>(at.stage), at.micro_batch, loc_of(at.where, at.node)};
  op.result_layouts = layout_ids_;
  ir::OpId id = builder().append(op);
  ir::Fill fill;
  if (at.fill) {
    fill = *at.fill;
  } else if (!operands.empty()) {
    fill = {0, 0};
    for (ir::ValueId v : operands) {
      fill.fullest = std::max(fill.fullest, function_->values[v].fill.fullest);
      fill.mean = std::max(fill.mean, function_->values[v].fill.mean);
    }
  }
  const ir::Op& appended = function_->ops[id];
  for (uint16_t r = 0; r < appended.result_count; ++r) function_->values[appended.first_result + r].fill = fill;
  return id;
}

ir::Fill Lowering::slots_fill(int32_t tensor, const ir::Layout& layout) {
  const Tensor& t = graph.tensors[tensor];
  if (t.slots_axis < 0) return {};
  const LogicalOp& dispatch = graph.ops[t.router];
  if (dispatch.attrs.boolean("padded")) return {};
  int64_t parts = 1;
  for (size_t a = 0; a < layout.size(); ++a)
    if (t.experts_axis >= 0 && layout[a].kind == ir::Sbp::Split && layout[a].dim == t.experts_axis)
      parts *= spec.mesh.axes()[a].size;
  // Every layer and micro-batch asks again: computed once per tensor and split.
  auto [cached, fresh] = slot_fills_.try_emplace((static_cast<uint64_t>(tensor) << 32) | static_cast<uint64_t>(parts));
  if (!fresh) return cached->second;
  const Tensor& gates = graph.tensors[dispatch.inputs[1].tensor];
  ops::RoutingLoad load;
  load.experts = gates.dims.back().size;
  load.capacity = t.dims[t.slots_axis].size;
  load.routes = gates.dims[gates.dims.size() - 2].size * dispatch.attrs.integer("k");
  load.skew = dispatch.attrs.real("skew");
  if (!resolved.expert_load.empty()) load.measured = resolved.expert_load[static_cast<size_t>(t.router)];
  return cached->second = {static_cast<float>(ops::fullest_slot_fill(load, parts)),
                           static_cast<float>(ops::fullest_slot_fill(load, 1))};
}

std::vector<ir::ValueId> Lowering::append_multi(const Emit& at, ir::OpKind kind, std::span<const ir::ValueId> operands,
                                                std::span<const ir::AttrValue> attrs,
                                                std::span<const ir::Layout> layouts) {
  const ir::Op& appended = function_->ops[append_op(at, kind, operands, attrs, layouts)];
  std::vector<ir::ValueId> results;
  for (int i = 0; i < appended.result_count; ++i) results.push_back(function_->result(appended, i));
  return results;
}

ir::ValueId Lowering::append(const Emit& at, ir::OpKind kind, std::initializer_list<ir::ValueId> operands,
                             std::initializer_list<ir::AttrValue> attrs, const ir::Layout& layout) {
  ir::OpId id =
      append_op(at, kind, std::span<const ir::ValueId>(operands.begin(), operands.size()),
                std::span<const ir::AttrValue>(attrs.begin(), attrs.size()), std::span<const ir::Layout>(&layout, 1));
  return function_->ops[id].first_result;
}

std::vector<int64_t> Lowering::block_dims(ir::ValueId flat, const ir::Layout& layout) const {
  const ir::TensorType& logical = module_.type(function_->values[flat].logical);
  std::vector<int64_t> dims(logical.shape().begin(), logical.shape().end());
  for (size_t a = 0; a < layout.size(); ++a)
    if (layout[a].kind == ir::Sbp::Split) dims[layout[a].dim] /= spec.mesh.axes()[a].size;
  return dims;
}

// The layouts are copies: callers pass layouts of the module's table, which
// interning new ones may move.
ir::ValueId Lowering::box(const Emit& at, ir::ValueId value, const ir::Layout from, const ir::Layout to, bool reuse) {
  if (from == to) return value;
  bool cacheable = reuse && function_->values[value].def != ir::kNone;  // parameters are re-gathered at each use
  uint64_t key = (static_cast<uint64_t>(value) << 32) | module_.intern_layout(to);
  if (cacheable) {
    if (auto it = boxed_.find(key); it != boxed_.end()) return it->second;
  }
  ir::Layout current = from;
  ir::ValueId v = value;
  for (const AxisTransfer& step : plan_boxing(from, to)) {
    if (step_group_size(step, spec.mesh) == 1) continue;  // one device: B, S and P coincide
    v = emit_boxing_step(at, step, {&v, 1}, current).front();
  }
  if (cacheable) boxed_[key] = v;
  return v;
}

std::vector<ir::ValueId> Lowering::box_group(const Emit& at, std::vector<ir::ValueId> values, const ir::Layout from,
                                             const ir::Layout to, bool gather_together) {
  ir::Layout current = from;
  for (const AxisTransfer& step : plan_boxing(from, to)) {
    if (step_group_size(step, spec.mesh) == 1) continue;
    // Reductions run as one grouped collective, and all-gathers where asked
    // to; other steps one per value.
    bool grouped = step.op == ir::OpKind::AllReduce || step.op == ir::OpKind::ReduceScatter ||
                   (gather_together && step.op == ir::OpKind::AllGather && !step.flat);
    if (grouped) {
      values = emit_boxing_step(at, step, values, current);
      continue;
    }
    ir::Layout before = current;
    for (ir::ValueId& v : values) {
      current = before;
      v = emit_boxing_step(at, step, {&v, 1}, current).front();
    }
  }
  return values;
}

std::vector<ir::ValueId> Lowering::emit_boxing_step(const Emit& at, const AxisTransfer& step,
                                                    std::span<const ir::ValueId> values, ir::Layout& current) {
  ir::Layout next = current;
  std::vector<ir::AttrValue> attrs;
  std::vector<int64_t> block;
  const bool max = current[step.axis].kind == ir::Sbp::PartialMax;
  // reduce_scatter and shard: into S(to_dim) or flat chunks.
  auto split_to_target = [&] {
    for (size_t a = 0; a < next.size(); ++a)
      if ((step_axes(step) >> a) & 1u) next[a] = step.flat ? ir::Sbp{ir::Sbp::Flat, 0} : split(step.to_dim);
    if (step.flat)
      attrs.push_back(ir::AttrValue::boolean("flat", true));
    else
      attrs.push_back(ir::AttrValue::integer("dim", step.to_dim));
  };
  switch (step.op) {
    case ir::OpKind::AllGather:
      for (size_t a = 0; a < next.size(); ++a)
        if ((step_axes(step) >> a) & 1u) next[a] = kBroadcast;
      if (step.flat) {
        block = block_dims(values.front(), next);
        attrs.push_back(ir::AttrValue::boolean("flat", true));
        attrs.push_back(ir::AttrValue::ints("shape", block));
      } else {
        attrs.push_back(ir::AttrValue::integer("dim", step.from_dim));
      }
      // Only the stored shard lives inside the buffer it is gathered into;
      // a later step's operand is a value of its own.
      if (at.in_place && function_->values[values.front()].def == ir::kNone)
        attrs.push_back(ir::AttrValue::boolean("in_place", true));
      break;
    case ir::OpKind::AllReduce:
      next[step.axis] = kBroadcast;
      if (max) attrs.push_back(ir::AttrValue::string("op", "max"));
      break;
    case ir::OpKind::ReduceScatter:
      split_to_target();
      if (max) attrs.push_back(ir::AttrValue::string("op", "max"));
      break;
    case ir::OpKind::AllToAll:
      for (size_t a = 0; a < next.size(); ++a)
        if ((step_axes(step) >> a) & 1u) next[a] = split(step.to_dim);
      attrs.push_back(ir::AttrValue::integer("split_dim", step.to_dim));
      attrs.push_back(ir::AttrValue::integer("concat_dim", step.from_dim));
      if (spec.train.moe_dispatcher == MoeDispatcher::Deduplicated && at.tensor >= 0) {
        // Experts' slots: each token is in them once per expert it chose.
        const Tensor& t = graph.tensors[at.tensor];
        if (t.slots_axis >= 0 && t.experts_axis >= 0 && t.router >= 0) {
          const LogicalOp& dispatch = graph.ops[t.router];
          attrs.push_back(ir::AttrValue::integer("copies", dispatch.attrs.integer("k")));
          attrs.push_back(ir::AttrValue::integer("experts", t.dims[t.experts_axis].size));
          if (dispatch.gates_top_k >= 0) append_expert_groups(graph.ops[dispatch.gates_top_k], attrs);
        }
      }
      break;
    case ir::OpKind::Shard:
      split_to_target();
      attrs.push_back(ir::AttrValue::integer("parts", step_group_size(step, spec.mesh)));
      attrs.push_back(ir::AttrValue::integer("axis", step.axis));
      if (step.span != 0) attrs.push_back(ir::AttrValue::integer("span", step.span));
      break;
    case ir::OpKind::Unshard:
      next[step.axis] = kPartial;
      attrs.push_back(ir::AttrValue::integer("dim", step.from_dim));
      attrs.push_back(ir::AttrValue::integer("parts", spec.mesh.axes()[step.axis].size));
      attrs.push_back(ir::AttrValue::integer("axis", step.axis));
      break;
    default:  // partialize, the one step left
      next[step.axis] = kPartial;
      attrs.push_back(ir::AttrValue::integer("axis", step.axis));
      break;
  }
  bool local = !ir::op_info(step.op).is_communication();
  std::vector<ir::LayoutId> layouts(values.size(), module_.intern_layout(next));
  ir::OpSpec op;
  op.kind = step.op;
  op.devices = stage_devices_[at.stage];
  op.operands = values;
  op.attrs = attrs;
  op.group_axes = local ? 0 : static_cast<uint16_t>(step_axes(step));
  op.meta = {local ? ir::Stream::Compute : at.stream, at.phase, static_cast<int16_t>(at.stage), at.micro_batch,
             loc_of(at.where, at.node)};
  op.result_layouts = layouts;
  const ir::Op& appended = function_->ops[builder().append(op)];
  std::vector<ir::ValueId> results;
  for (int i = 0; i < appended.result_count; ++i) {
    results.push_back(function_->result(appended, i));
    // A layout change keeps what its value holds.
    function_->values[results.back()].fill = function_->values[values[static_cast<size_t>(i)]].fill;
  }
  current = next;
  return results;
}

void Lowering::add_grad(ir::ValueId& slot, ir::ValueId grad, const Emit& at) {
  if (slot == ir::kNone) {
    slot = grad;
    return;
  }
  const ir::Value& value = function_->values[slot];
  ir::Layout layout = value.layout != ir::kNoLayout ? module_.layout(value.layout) : ir::Layout{};
  slot = append(at, ir::OpKind::Add, {slot, grad}, {}, layout);
}

// --- values ---

ir::ValueId Lowering::input_value(int32_t t, int32_t mb, int32_t stage, bool recompute) {
  const Tensor& tensor = graph.tensors[t];
  if (tensor.kind == TensorKind::Input) {
    uint64_t key = stage_key(t, mb, stage);
    if (auto it = data_args_.find(key); it != data_args_.end()) return it->second;
    const bool micro_batched = resolved.batch_splits > 1;  // a probe may run one of several
    std::string name = micro_batched ? fmt::format("{}.mb{}", tensor.name, mb) : tensor.name;
    ir::InputData data;
    data.data = module_.intern(tensor.name);
    data.batch_axis = tensor.batch_axis;
    data.micro_batch = micro_batched ? mb : -1;
    data.micro_batches = resolved.batch_splits;
    data.values = input_values(graph, t);
    ir::ValueId arg = builder().add_arg(name, ir::ArgKind::Input, local_type(t, sbp.layouts[t], compute_dtype(t)),
                                        stage_devices_[stage], module_.intern_layout(sbp.layouts[t]), data);
    data_args_[key] = arg;
    return arg;
  }
  int32_t producer_stage = resolved.stage_of_op[tensor.producer];
  if (stage_devices_[producer_stage] == stage_devices_[stage]) {  // same stage, or another on these devices
    if (recompute && recomputed_.get(t, mb) != ir::kNone) return recomputed_.get(t, mb);
    return forward_.get(t, mb);
  }
  uint64_t key = stage_key(t, mb, stage);
  if (auto it = received_on_.find(key); it != received_on_.end()) return it->second;
  ir::TypeId type = module_.intern_type(local_type(t, sbp.layouts[t], compute_dtype(t)));
  ir::LayoutId layout = module_.intern_layout(sbp.layouts[t]);
  ir::OpSpec op;
  op.kind = ir::OpKind::Recv;
  op.devices = stage_devices_[stage];
  op.peer = stage_devices_[producer_stage];
  op.channel = channels_.at(key);
  op.meta = {ir::Stream::Pipeline, ir::Phase::Forward, static_cast<int16_t>(stage), mb, loc_of(tensor.where)};
  op.result_types = std::span<const ir::TypeId>(&type, 1);
  op.result_layouts = std::span<const ir::LayoutId>(&layout, 1);
  ir::ValueId v = builder().append_value(op);
  received_on_[key] = v;
  return v;
}

ir::ValueId Lowering::op_input(const Emit& at, int32_t op, size_t i, bool recompute) {
  int32_t t = graph.ops[op].inputs[i].tensor;
  Emit boxing = at;
  boxing.stream = ir::Stream::Feature;
  boxing.tensor = t;
  if (fp8_op(op)) {
    if (graph.tensors[t].kind == TensorKind::Param)
      return fp8_input(at, param_value(t, at), param_layout(t), input_layout(op, i), false, true);
    ir::ValueId stored = input_value(t, at.micro_batch, at.stage, recompute);
    ir::ValueId read = fp8_input(at, stored, sbp.layouts[t], input_layout(op, i), true, false);
    if (read != stored) function_->values[read].fill = slots_fill(t, input_layout(op, i));
    return read;
  }
  if (graph.tensors[t].kind != TensorKind::Param) {
    ir::ValueId stored = input_value(t, at.micro_batch, at.stage, recompute);
    ir::ValueId read = box(boxing, stored, sbp.layouts[t], input_layout(op, i));
    // Experts' slots moved to another split of the experts fill as that one
    // does (the fullest rank's experts against every rank's).
    if (read != stored) function_->values[read].fill = slots_fill(t, input_layout(op, i));
    return read;
  }
  return box(boxing, param_value(t, at), param_layout(t), input_layout(op, i), false);
}

// Ring attention's keys and values (inputs 1 and 2 of an attention) boxed
// together, their gathers one grouped exchange (Transformer Engine sends
// them as one message), also when another step comes first (Ulysses'
// all-to-all inside a node under hierarchical context parallelism,
// Megatron-Core's a2a+p2p).
bool Lowering::boxes_keys_with_values(int32_t op, size_t i) const {
  const LogicalOp& lop = graph.ops[op];
  if (spec.train.cp_exchange != ContextParallelExchange::Ring || lop.type != ops::OpKind::Attention || i != 1 ||
      fp8_op(op))
    return false;
  const int32_t k = lop.inputs[1].tensor, v = lop.inputs[2].tensor;
  return k != v && graph.tensors[k].kind == TensorKind::Activation && graph.tensors[v].kind == TensorKind::Activation &&
         sbp.layouts[k] == sbp.layouts[v] && input_layout(op, 1) == input_layout(op, 2) &&
         gathers(sbp.layouts[k], input_layout(op, 1));
}

std::vector<ir::ValueId> Lowering::key_value_inputs(const Emit& at, int32_t op, bool recompute) {
  const LogicalOp& lop = graph.ops[op];
  Emit boxing = at;
  boxing.stream = ir::Stream::Feature;
  std::vector<ir::ValueId> stored{input_value(lop.inputs[1].tensor, at.micro_batch, at.stage, recompute),
                                  input_value(lop.inputs[2].tensor, at.micro_batch, at.stage, recompute)};
  return box_group(boxing, stored, sbp.layouts[lop.inputs[1].tensor], input_layout(op, 1), true);
}

// --- blocks ---

void Lowering::emit_forward_block(int32_t stage, int32_t mb, bool recompute, int32_t unit) {
  for (int32_t op : stage_ops_[stage]) {
    if (recompute && resolved.recompute_unit[op] != unit) continue;
    const LogicalOp& lop = graph.ops[op];
    Emit at{stage, mb, recompute ? ir::Phase::Recompute : ir::Phase::Forward, ir::Stream::Compute, lop.where, lop.node};
    std::vector<ir::ValueId> inputs;
    for (size_t i = 0; i < lop.inputs.size(); ++i) {
      if (boxes_keys_with_values(op, i)) {
        std::vector<ir::ValueId> kv = key_value_inputs(at, op, recompute);
        inputs.insert(inputs.end(), kv.begin(), kv.end());
        ++i;  // the values came with the keys
      } else {
        inputs.push_back(op_input(at, op, i, recompute));
      }
    }
    for (size_t i = 0; i < inputs.size(); ++i)
      saved_inputs_.at(static_cast<int32_t>(input_base_[op] + i), mb) = inputs[i];
    Emit op_at = at;
    op_at.fill = slots_fill(lop.output, output_layout(op));
    ir::ValueId out = emit_forward_op(op_at, op, inputs);
    (recompute ? recomputed_ : forward_).at(lop.output, mb) = out;
    saved_outputs_.at(op, mb) = out;
    if (recompute) continue;
    if (lop.output == (spec.train.training ? graph.loss : graph.output)) output_values_.push_back(out);
    for (int32_t to : consumer_stages_[lop.output]) {
      if (stage_devices_[to] == stage_devices_[stage]) continue;
      uint32_t channel = next_channel_++;
      channels_[stage_key(lop.output, mb, to)] = channel;
      ir::OpSpec send;
      send.kind = ir::OpKind::Send;
      send.devices = stage_devices_[stage];
      send.peer = stage_devices_[to];
      send.channel = channel;
      send.operands = std::span<const ir::ValueId>(&out, 1);
      send.meta = {ir::Stream::Pipeline, ir::Phase::Forward, static_cast<int16_t>(stage), mb, loc_of(lop.where)};
      builder().append(send);
    }
  }
}

void Lowering::emit_backward_block(int32_t stage, int32_t mb, bool input_grads, bool weight_grads) {
  if (input_grads) {
    // Gradients of this stage's outputs that later stages read.
    for (int32_t op : stage_ops_[stage]) {
      int32_t t = graph.ops[op].output;
      for (int32_t from : consumer_stages_[t]) {
        auto channel = grad_channels_.find(stage_key(t, mb, from));
        if (from == stage || channel == grad_channels_.end()) continue;
        ir::Layout layout = dual_layout(sbp.layouts[t]);
        ir::TypeId type = module_.intern_type(local_type(t, layout, compute_dtype(t)));
        ir::LayoutId layout_id = module_.intern_layout(layout);
        ir::OpSpec recv;
        recv.kind = ir::OpKind::Recv;
        recv.devices = stage_devices_[stage];
        recv.peer = stage_devices_[from];
        recv.channel = channel->second;
        recv.meta = {ir::Stream::Pipeline, ir::Phase::InputGrad, static_cast<int16_t>(stage), mb,
                     loc_of(graph.tensors[t].where)};
        recv.result_types = std::span<const ir::TypeId>(&type, 1);
        recv.result_layouts = std::span<const ir::LayoutId>(&layout_id, 1);
        ir::ValueId g = builder().append_value(recv);
        add_grad(grads_.at(t, mb), g, {stage, mb, ir::Phase::InputGrad, ir::Stream::Compute, {}});
      }
    }
    if (graph.loss >= 0 && resolved.stage_of_op[graph.tensors[graph.loss].producer] == stage) {
      // d loss / d loss = 1, replicated, then in the dual of the loss's
      // layout: where the loss is replicated (B) the gradient is partial, so
      // one device keeps the 1 and the others hold 0.
      ir::Layout layout = dual_layout(sbp.layouts[graph.loss]);
      ir::Layout whole(layout.size(), kBroadcast);
      Emit at{stage, mb, ir::Phase::InputGrad, ir::Stream::Compute, graph.tensors[graph.loss].where};
      ir::ValueId one = append(
          at, ir::OpKind::Fill, {},
          {ir::AttrValue::ints("shape", {}), ir::AttrValue::string("dtype", "f32"), ir::AttrValue::real("value", 1.0)},
          whole);
      grads_.at(graph.loss, mb) = box(at, one, whole, layout);
    }
  }

  const auto& ops = stage_ops_[stage];
  std::vector<int32_t> replayed;  // recompute units replayed in this block
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    int32_t op = *it;
    const LogicalOp& lop = graph.ops[op];
    ir::ValueId grad_output;
    if (input_grads) {
      Emit back{stage, mb, ir::Phase::InputGrad, ir::Stream::Feature, lop.where, lop.node};
      if (fp8_op(op)) quantize_pending_grad(op, mb, back);
      ir::ValueId pending = flush_grads(lop.output, mb, dual_layout(sbp.layouts[lop.output]), std::nullopt, back);
      if (pending != ir::kNone) add_grad(grads_.at(lop.output, mb), pending, back);
      grad_output = grad_outputs_.at(op, mb) = grads_.get(lop.output, mb);
    } else {
      grad_output = grad_outputs_.get(op, mb);
    }
    if (grad_output == ir::kNone) continue;
    // Recomputation: the op's unit replays its forward just before the
    // unit's backward, so only one unit's activations are alive at a time.
    int32_t unit = resolved.recompute_unit[op];
    if (input_grads && unit >= 0 && std::find(replayed.begin(), replayed.end(), unit) == replayed.end()) {
      replayed.push_back(unit);
      emit_forward_block(stage, mb, true, unit);
    }
    Emit at{stage,     mb,      input_grads ? ir::Phase::InputGrad : ir::Phase::WeightGrad, ir::Stream::Compute,
            lop.where, lop.node};
    std::vector<ir::ValueId> inputs(lop.inputs.size(), ir::kNone);
    auto input = [&](size_t i) {
      if (inputs[i] != ir::kNone) return inputs[i];
      int32_t t = lop.inputs[i].tensor;
      if (graph.tensors[t].kind == TensorKind::Param) {
        bool regather = param_layout(t) != input_layout(op, i);
        return inputs[i] = regather ? op_input(at, op, i, false)
                                    : saved_inputs_.get(static_cast<int32_t>(input_base_[op] + i), mb);
      }
      // An activation the forward all-gathered to read (the input of a
      // column-parallel linear under sequence parallelism) is kept as the
      // shard it is stored as and gathered again here, as Megatron does:
      // the step holds 1/t of it between forward and backward.
      if (resolved.recompute_unit[op] < 0 && gathers(sbp.layouts[t], input_layout(op, i))) {
        if (size_t keys = i == 2 ? 1 : i; boxes_keys_with_values(op, keys)) {
          std::vector<ir::ValueId> kv = key_value_inputs(at, op, false);
          inputs[keys] = kv[0];
          inputs[keys + 1] = kv[1];
          return inputs[i];
        }
        ir::ValueId stored = input_value(t, mb, stage, false);
        // An FP8 op gathers its e4m3 copy (its own key: bit 63).
        uint64_t key = (static_cast<uint64_t>(stored) << 32) | module_.intern_layout(input_layout(op, i)) |
                       (static_cast<uint64_t>(fp8_op(op)) << 63);
        auto [slot, fresh] = regathered_.try_emplace(key, ir::kNone);
        if (fresh) {
          Emit boxing = at;
          boxing.stream = ir::Stream::Feature;
          slot->second = fp8_op(op) ? fp8_input(at, stored, sbp.layouts[t], input_layout(op, i), false, false)
                                    : box(boxing, stored, sbp.layouts[t], input_layout(op, i), false);
        }
        return inputs[i] = slot->second;
      }
      return inputs[i] = saved_inputs_.get(static_cast<int32_t>(input_base_[op] + i), mb);
    };
    std::vector<GradContribution> grads =
        emit_backward_op(at, op, input, saved_outputs_.get(op, mb), grad_output, input_grads, weight_grads);
    for (const GradContribution& c : grads) {
      int32_t t = lop.inputs[c.input].tensor;
      ir::Layout read = c.layout != ir::kNoLayout ? module_.layout(c.layout) : dual_layout(input_layout(op, c.input));
      auto [slot, inserted] = pending_grads_[mb].try_emplace(std::make_pair(t, module_.intern_layout(read)), c.grad);
      if (!inserted) slot->second = append(at, ir::OpKind::Add, {slot->second, c.grad}, {}, read);
    }
    // A parameter's gradient is complete for this micro-batch once its first
    // reader on the stage has run backward: accumulate it then, so the
    // micro-batch's weight gradients are not all alive at once.
    if (weight_grads) {
      for (const Operand& in : lop.inputs)
        if (graph.tensors[in.tensor].kind == TensorKind::Param && first_reader(in.tensor, stage) == op)
          flush_param_grad(in.tensor, stage, mb);
    }
  }

  if (input_grads) {
    // Send the gradients of tensors that earlier stages produced back to them.
    std::vector<int32_t> remote;
    for (const auto& [key, g] : pending_grads_[mb]) {
      int32_t t = key.first;
      const Tensor& tensor = graph.tensors[t];
      if (tensor.kind == TensorKind::Activation && resolved.stage_of_op[tensor.producer] != stage &&
          (remote.empty() || remote.back() != t))
        remote.push_back(t);
    }
    for (int32_t t : remote) {
      Emit back{stage, mb, ir::Phase::InputGrad, ir::Stream::Feature, graph.tensors[t].where};
      ir::ValueId g = flush_grads(t, mb, dual_layout(sbp.layouts[t]), std::nullopt, back);
      int32_t to = resolved.stage_of_op[graph.tensors[t].producer];
      if (stage_devices_[to] == stage_devices_[stage]) {  // the producer's stage runs here too
        add_grad(grads_.at(t, mb), g, back);
        continue;
      }
      uint32_t channel = next_channel_++;
      grad_channels_[stage_key(t, mb, stage)] = channel;
      ir::OpSpec send;
      send.kind = ir::OpKind::Send;
      send.devices = stage_devices_[stage];
      send.peer = stage_devices_[to];
      send.channel = channel;
      send.operands = std::span<const ir::ValueId>(&g, 1);
      send.meta = {ir::Stream::Pipeline, ir::Phase::InputGrad, static_cast<int16_t>(stage), mb,
                   loc_of(graph.tensors[t].where)};
      builder().append(send);
    }
  }
  if (weight_grads) flush_param_grads(stage, mb);
  if (weight_grads && ++weight_blocks_done_[stage] == resolved.micro_batches) {
    if (spec.train.overlap_grad_reduce) {
      flush_grad_buckets(stage);
    } else {
      // Without overlap (Megatron-LM 2021's local DDP all-reduces after the
      // pipeline flush), a rank's reductions wait for the backward of every
      // stage it holds: an interleaved rank's early chunks do not reduce
      // while its later chunks still run backward.
      std::vector<int32_t> here;
      for (int32_t s = 0; s < resolved.num_stages; ++s)
        if (stage_devices_[s] == stage_devices_[stage]) here.push_back(s);
      if (std::all_of(here.begin(), here.end(),
                      [&](int32_t s) { return weight_blocks_done_[s] == resolved.micro_batches; })) {
        for (int32_t s : here) {
          sync_param_grads_after_backward(s);
          flush_grad_buckets(s);
        }
      }
    }
  }
}

ir::ValueId Lowering::flush_grads(int32_t tensor, int32_t mb, const ir::Layout& target, std::optional<ir::DType> dtype,
                                  const Emit& at) {
  ir::ValueId total = ir::kNone;
  auto& pending = pending_grads_[mb];
  auto it = pending.lower_bound({tensor, 0});
  while (it != pending.end() && it->first.first == tensor) {
    const ir::Layout read = module_.layout(it->first.second);
    ir::ValueId g = it->second;
    Emit local = at;
    local.stream = ir::Stream::Compute;
    Emit boxing = at;
    boxing.tensor = tensor;
    // Boxed in the precision it was computed in, then cast: ZeRO-2/3
    // reduce-scatter low-precision gradients (DeepSpeed), and no full-size
    // fp32 copy of a gradient ever exists.
    g = box(boxing, g, read, target);
    if (dtype && type_of(g).dtype != *dtype)
      g = append(local, ir::OpKind::Cast, {g}, {ir::AttrValue::string("dtype", ir::dtype_name(*dtype))}, target);
    total = total == ir::kNone ? g : append(local, ir::OpKind::Add, {total, g}, {}, target);
    it = pending.erase(it);
  }
  return total;
}

// An FP8 GEMM's output gradient, where it arrives whole in one layout,
// quantized to e5m2 there and moved in fp8 (a sequence-parallel gradient
// all-gathered in e5m2, as Transformer Engine gathers it).
void Lowering::quantize_pending_grad(int32_t op, int32_t mb, const Emit& at) {
  int32_t t = graph.ops[op].output;
  auto& pending = pending_grads_[mb];
  auto it = pending.lower_bound({t, 0});
  if (it == pending.end() || it->first.first != t || grads_.get(t, mb) != ir::kNone) return;
  if (auto next = std::next(it); next != pending.end() && next->first.first == t) return;
  const ir::Layout read = module_.layout(it->first.second);
  if (std::any_of(read.begin(), read.end(), [](const ir::Sbp& s) {
        return s.kind == ir::Sbp::PartialSum || s.kind == ir::Sbp::PartialMax || s.kind == ir::Sbp::Flat;
      }))
    return;
  Emit local = at;
  local.stream = ir::Stream::Compute;
  ir::ValueId q = quantized(local, it->second, ir::DType::F8E5M2, read);
  pending.erase(it);
  Emit boxing = at;
  boxing.tensor = t;
  add_grad(grads_.at(t, mb), box(boxing, q, read, dual_layout(sbp.layouts[t])), at);
}

ir::Module Lowering::run() {
  function_ = &module_.add_function(spec.train.training ? "train_step" : "forward");
  builder_.emplace(module_, *function_);
  create_parameters();
  // The op order follows the schedule run step by step, so each device's
  // order is its row of the table and every send precedes its recv.
  schedule::ScheduleRun run = schedule::run_unit_time(resolved.table);
  std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> order;  // (step, (rank, index))
  for (size_t r = 0; r < resolved.table.ranks.size(); ++r)
    for (size_t i = 0; i < run.steps[r].size(); ++i)
      order.push_back({run.steps[r][i], {static_cast<int32_t>(r), static_cast<int32_t>(i)}});
  std::sort(order.begin(), order.end());
  FunctionSizeForecast forecast;
  for (const auto& [step, where] : order) {
    const schedule::Action& a = resolved.table.ranks[where.first][where.second];
    forecast.expect(a.stage, a.kind);
  }
  std::vector<std::vector<ActionOps>> action_ops(resolved.table.ranks.size());
  for (size_t r = 0; r < resolved.table.ranks.size(); ++r) action_ops[r].resize(resolved.table.ranks[r].size());
  for (const auto& [step, where] : order) {
    const schedule::Action& a = resolved.table.ranks[where.first][where.second];
    ActionOps& emitted = action_ops[where.first][where.second];
    emitted.begin = static_cast<uint32_t>(function_->ops.size());
    forecast.begin(*function_);
    switch (a.kind) {
      case schedule::ActionKind::Forward: emit_forward_block(a.stage, a.micro_batch, false); break;
      case schedule::ActionKind::Backward: emit_backward_block(a.stage, a.micro_batch, true, true); break;
      case schedule::ActionKind::InputGrad: emit_backward_block(a.stage, a.micro_batch, true, false); break;
      case schedule::ActionKind::WeightGrad: emit_backward_block(a.stage, a.micro_batch, false, true); break;
    }
    forecast.end(*function_, a.stage, a.kind);
    emitted.end = static_cast<uint32_t>(function_->ops.size());
  }
  if (resolved.schedule[resolved.schedule_node].overlap_all_to_all)
    interleave_at_all_to_alls(*function_, resolved.table, action_ops);
  if (spec.train.training) {
    for (int32_t s = 0; s < resolved.num_stages; ++s) flush_grad_buckets(s);
    sum_shared_param_grads();
  }
  place_sends_at_their_recvs(*function_);
  function_->returns = output_values_;
  if (spec.train.training) {
    for (int32_t s = 0; s < resolved.num_stages; ++s) emit_optimizer(s);
  }
  if (spec.train.tp_comm_overlap || spec.train.cp_exchange == ContextParallelExchange::Ring)
    pipeline_activation_collectives();
  return std::move(module_);
}

// Collectives pipelined with the op they feed or follow, written as the
// collective's `chunks` (its group size) for the simulator:
// - Megatron-Core's --tp-comm-overlap (userbuffers): an activation's
//   all-gather whose every reader is a GEMM is exchanged in pieces that the
//   GEMMs start on as they arrive, and a GEMM's partial sum read only by a
//   reduce-scatter is scattered piece by piece as the GEMM writes it.
//   Weights gathered by ZeRO-3 are not: FSDP prefetches those whole.
// - Ring attention (cp_comm_type = p2p): keys and values gathered for
//   attention (or its gradient) arrive one shard per ring step while the
//   shards already there are attended to, and their gradients go back
//   around the ring as the gradient op produces them. The function is the
//   all-gather exchange's, so executors and verify see the same program.
void Lowering::pipeline_activation_collectives() {
  ir::Function& f = *function_;
  std::vector<std::vector<ir::OpId>> readers(f.values.size());
  for (ir::OpId id = 0; id < f.ops.size(); ++id)
    for (ir::ValueId v : f.operands(f.ops[id])) readers[v].push_back(id);
  auto from_parameter = [&](ir::ValueId v) {
    while (true) {
      ir::OpId def = f.values[v].def;
      if (def == ir::kNone) {
        for (const ir::Arg& a : f.args)
          if (a.value == v) return !ir::is_batch_data(a.kind);
        return false;
      }
      const ir::Op& op = f.ops[def];
      if (op.operand_count != 1 || ir::op_info(op.kind).is_communication()) return false;
      v = f.operands(op)[0];
    }
  };
  auto set_chunks = [&](ir::Op& op) {
    const ir::OpInfo& info = ir::op_info(op.kind);
    uint8_t slot = 0;
    while (slot < info.attrs.size() && info.attrs[slot].name != "chunks") ++slot;
    ir::Attr chunks;
    chunks.slot = slot;
    chunks.type = ir::AttrType::Int;
    chunks.i = ir::group_size(module_, op);
    if (chunks.i < 2) return;
    std::vector<ir::Attr> attrs(f.attrs(op).begin(), f.attrs(op).end());
    attrs.push_back(chunks);
    op.attr_begin = static_cast<uint32_t>(f.attr_pool.size());
    op.attr_count = static_cast<uint16_t>(attrs.size());
    f.attr_pool.insert(f.attr_pool.end(), attrs.begin(), attrs.end());
  };
  const bool gemms = spec.train.tp_comm_overlap, ring = spec.train.cp_exchange == ContextParallelExchange::Ring;
  auto pipelines = [&](ir::OpId id) {
    ir::OpKind kind = f.ops[id].kind;
    return (gemms && kind == ir::OpKind::Einsum) ||
           (ring && (kind == ir::OpKind::Attention || kind == ir::OpKind::AttentionGrad));
  };
  for (ir::OpId id = 0; id < f.ops.size(); ++id) {
    ir::Op& op = f.ops[id];
    // Activations' exchanges only: gradient reductions (ZeRO's
    // reduce-scatters) run on the grad stream and are bucketed instead.
    if (op.stream != ir::Stream::Feature) continue;
    if (op.kind == ir::OpKind::AllGather) {
      const std::vector<ir::OpId>& r = readers[op.first_result];
      if (!r.empty() && std::all_of(r.begin(), r.end(), pipelines) && !from_parameter(f.operands(op)[0]))
        set_chunks(op);
    } else if (op.kind == ir::OpKind::ReduceScatter) {
      // Every operand written by the same op and read by nothing else.
      std::span<const ir::ValueId> in = f.operands(op);
      ir::OpId def = f.values[in.front()].def;
      if (def != ir::kNone && pipelines(def) && std::all_of(in.begin(), in.end(), [&](ir::ValueId v) {
            return f.values[v].def == def && readers[v].size() == 1;
          }))
        set_chunks(op);
    }
  }
}

ir::Module lower_to_ir(const PlannedStrategy& plan, const SourceManager& sources) {
  return Lowering(plan.program->graph, plan.program->spec, plan.sbp, plan.resolved, sources).run();
}

}  // namespace dstc::compiler
