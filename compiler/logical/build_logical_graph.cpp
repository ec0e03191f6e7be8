#include "compiler/logical/build_logical_graph.h"

#include <algorithm>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"

namespace dstc::compiler {
namespace {

using ops::OpKind;

int axis_named(const std::vector<std::string>& dims, const std::string& name) {
  auto it = std::find(dims.begin(), dims.end(), name);
  return it == dims.end() ? -1 : static_cast<int>(it - dims.begin());
}

class LogicalGraphBuilder {
 public:
  LogicalGraphBuilder(const frontend::Strategy& s, DiagnosticEngine& d) : strategy_(s), model_(*s.model), diags_(d) {}

  std::optional<LogicalProgram> run(bool single_device) {
    build_nodes();
    build_tensors();
    for (size_t i = 0; i < model_.ops.size(); ++i) translate(model_.ops[i]);
    check_routes();
    if (!ok_) return std::nullopt;
    graph_.output = tensor(model_.output);
    graph_.loss = strategy_.run.training ? graph_.output : -1;
    graph_.infer_batch_axes();
    graph_.infer_slots_axes();
    check_sequence_balance();
    if (!ok_) return std::nullopt;
    // The strategy's global batch sizes every batch dim (the model's own
    // batch parameter is only its default).
    int64_t batch = strategy_.run.batch * strategy_.run.accumulate;
    if (batch > 0) {
      for (Tensor& t : graph_.tensors)
        if (t.batch_axis >= 0) t.dims[t.batch_axis].size = batch;
    }
    LogicalProgram out;
    out.graph = std::move(graph_);
    out.spec = single_device ? single_device_spec(out.graph) : strategy_spec(out.graph);
    if (!ok_) return std::nullopt;
    out.samples_per_step = batch;
    out.tokens_per_sample = tokens_per_sample();
    return out;
  }

 private:
  int32_t tensor(frontend::TensorId t) const { return t < 0 ? -1 : tensor_map_[t]; }

  // The dim named `s` or `seq` right after the batch dim of an input: an
  // MLP's [b, h] input has no sequence, its hidden size is not one.
  std::optional<int64_t> tokens_per_sample() const {
    for (frontend::TensorId t : model_.inputs) {
      const auto& dims = model_.tensors[t].dims;
      if (dims.size() >= 2 && dims[0].name == model_.batch_dim && (dims[1].name == "s" || dims[1].name == "seq") &&
          dims[1].size > 1)
        return dims[1].size;
    }
    return std::nullopt;
  }

  void build_nodes() {
    for (size_t i = 0; i < model_.nodes.size(); ++i) {
      const frontend::Node& n = model_.nodes[i];
      int32_t id = graph_.add_node(i == 0 ? -1 : n.parent, n.name, n.component, n.range);
      graph_.nodes[id].path = n.path;
      graph_.nodes[id].repeated = n.index >= 0;
    }
  }

  void build_tensors() {
    // Tied parameters become one: every later member reads the first.
    std::vector<frontend::TensorId> same_as(model_.tensors.size(), frontend::kNone);
    for (const frontend::TiedParams& tie : strategy_.ties)
      for (size_t k = 1; k < tie.params.size(); ++k) same_as[tie.params[k]] = tie.params[0];
    tensor_map_.assign(model_.tensors.size(), -1);
    for (size_t i = 0; i < model_.tensors.size(); ++i) {
      const frontend::Tensor& t = model_.tensors[i];
      Tensor out;
      out.name = t.name;
      for (const frontend::Dim& d : t.dims) out.dims.push_back({d.name, d.size});
      out.dtype = t.dtype;
      out.kind = t.role == frontend::TensorRole::Param   ? TensorKind::Param
                 : t.role == frontend::TensorRole::Input ? TensorKind::Input
                                                         : TensorKind::Activation;
      out.trainable = t.trainable;
      out.node = t.node;
      out.where = t.range;
      if (out.kind == TensorKind::Input) {
        for (size_t a = 0; a < t.dims.size(); ++a)
          if (t.dims[a].name == model_.batch_dim) out.batch_axis = static_cast<int32_t>(a);
      }
      tensor_map_[i] = graph_.add_tensor(std::move(out));
    }
    for (size_t i = 0; i < same_as.size(); ++i)
      if (same_as[i] != frontend::kNone) tensor_map_[i] = tensor_map_[same_as[i]];
  }

  void unsupported(const frontend::Op& op, const std::string& why) {
    diags_.error(diag::kUnsupportedOp, op.range,
                 fmt::format("the compiler cannot lower this {} yet: {}", ops::op_name(op.kind), why));
    ok_ = false;
  }

  // A sequence-wise load-balancing loss counts along the dim before the
  // experts'; were that the batch, micro-batching would cut what it counts.
  void check_sequence_balance() {
    for (const LogicalOp& op : graph_.ops) {
      if (op.type != OpKind::TopK || op.attrs.real("seq_aux_loss") <= 0) continue;
      const Tensor& scores = graph_.tensors[op.inputs[0].tensor];
      if (scores.batch_axis != op.axis - 1) continue;
      diags_
          .error(diag::kDimMismatch, op.where,
                 fmt::format("seq_aux_loss balances each sequence, the dim before {}, but {} is the batch here",
                             op.inputs[0].dims[static_cast<size_t>(op.axis)],
                             op.inputs[0].dims[static_cast<size_t>(op.axis - 1)]))
          .note("give the scores a sequence dim before the experts', or balance the micro-batch with aux_loss");
      ok_ = false;
    }
  }

  // A dispatch's k is what the simulator prices it by: it must be the k of
  // the top_k its gates come from (through a renormalisation), whose
  // groups (node-limited routing) it takes.
  void check_routes() {
    for (LogicalOp& op : graph_.ops) {
      if (op.type != OpKind::Dispatch) continue;
      int32_t producer = graph_.tensors[op.inputs[1].tensor].producer;
      while (producer >= 0 && (graph_.ops[producer].type == OpKind::Div || graph_.ops[producer].type == OpKind::Mul ||
                               graph_.ops[producer].type == OpKind::Scale))
        producer = graph_.tensors[graph_.ops[producer].inputs[0].tensor].producer;
      if (producer < 0 || graph_.ops[producer].type != OpKind::TopK) continue;
      const LogicalOp& top = graph_.ops[producer];
      op.gates_top_k = producer;
      if (top.attrs.integer("k") == op.attrs.integer("k")) continue;
      diags_
          .error(diag::kRoutesMismatch, op.where,
                 fmt::format("dispatch is priced for k = {} experts per token, but its gates keep the top {}",
                             op.attrs.integer("k"), top.attrs.integer("k")))
          .note(top.where, "the gates' top_k is here");
      ok_ = false;
    }
  }

  // An op of the model as the graph holds it: its attributes as written,
  // the axis its `dim` names, and a canonical kind (matmul is an einsum,
  // global_avgpool a mean, identity an alias). A form of the op the
  // lowering cannot take yet is refused here, by the op's lowering limit,
  // before any strategy is applied.
  void translate(const frontend::Op& op) {
    LogicalOp out;
    out.node = op.node;
    out.where = op.range;
    for (const frontend::OpInput& in : op.inputs) out.inputs.push_back({tensor(in.tensor), in.dims});
    out.output = tensor(op.output);
    for (const Dim& d : graph_.tensors[out.output].dims) out.output_dims.push_back(d.name);
    out.type = op.kind;
    out.attrs = op.attrs;
    if (op.attrs.declares("dim")) out.axis = axis_named(out.inputs[0].dims, op.attrs.dim("dim"));
    if (ops::LoweringLimit limit = ops::op_def(op.kind).lowering_limit) {
      std::vector<std::vector<std::string>> dims;
      for (const Operand& in : out.inputs) dims.push_back(in.dims);
      ops::LoweringQuery query{ops::op_name(op.kind), dims, out.output_dims, out.attrs, out.axis, model_.batch_dim};
      if (std::optional<std::string> why = limit(query)) {
        unsupported(op, *why);
        return;
      }
    }
    switch (op.kind) {
      case OpKind::Identity:
        // An alias: consumers read the input.
        tensor_map_[op.output] = out.inputs[0].tensor;
        return;
      case OpKind::Matmul: out.type = OpKind::Einsum; break;
      case OpKind::Add:
      case OpKind::Mul:
      case OpKind::Maximum:
        // The smaller operand broadcasts over the other's other dims (the
        // lowering expands it where the IR does not broadcast); the full one
        // goes first.
        if (out.inputs[1].dims.size() > out.inputs[0].dims.size()) std::swap(out.inputs[0], out.inputs[1]);
        break;
      case OpKind::Sum:
      case OpKind::Mean:
      case OpKind::Max: out.axes = {out.axis}; break;
      case OpKind::GlobalAvgPool: {
        const int rank = static_cast<int>(out.inputs[0].dims.size());
        out.type = OpKind::Mean;
        out.axes = {rank - 2, rank - 1};
        break;
      }
      default: break;
    }
    graph_.add_op(std::move(out));
  }

  // --- the strategy ---

  // A memory config's layout and the axes it writes.
  static TensorLayoutConfig layout_config(const std::vector<frontend::Sbp>& sbp, SourceRange where) {
    TensorLayoutConfig config{layout_of(sbp), where, 0};
    for (size_t a = 0; a < sbp.size(); ++a)
      if (sbp[a].written) config.written |= 1u << a;
    return config;
  }

  // A memory config's layout; the front end resolved its split dims to
  // indices (elaborate_strategy.cpp, memory()).
  static ir::Layout layout_of(const std::vector<frontend::Sbp>& sbp) {
    ir::Layout layout;
    for (const frontend::Sbp& s : sbp) {
      ir::Sbp out;
      if (s.kind == ir::Sbp::Split) {
        out = {ir::Sbp::Split, static_cast<uint8_t>(std::max(s.dim_index, 0))};
      } else {
        out = {s.kind, 0};
      }
      layout.push_back(out);
    }
    return layout;
  }

  static std::optional<AxisCompute> axis_compute(const frontend::Sbp& s) {
    if (!s.written) return std::nullopt;
    return AxisCompute{s.kind, s.kind == ir::Sbp::Split ? s.dim : std::string{}};
  }

  static ComputeConfig compute_config(const frontend::ComputeConfig& c) {
    ComputeConfig out;
    for (const frontend::Sbp& s : c.sbp) out.axes.push_back(axis_compute(s));
    out.where = c.range;
    return out;
  }

  void run_config(StrategySpec& spec) {
    const frontend::RunConfig& run = strategy_.run;
    spec.train.training = run.training;
    spec.train.global_batch = run.batch;
    spec.train.optimizer = run.optimizer;
    spec.train.precision = run.precision;
    spec.train.master_weights = run.master_weights;
    spec.train.grad_precision = run.grad_precision;
    spec.train.overlap_grad_reduce = run.overlap_grad_reduce;
    spec.train.overlap_param_gather = run.overlap_param_gather;
    spec.train.grad_bucket = run.grad_bucket;
    spec.train.batch_norm = run.batch_norm;
    spec.train.fp8 = run.fp8;
    spec.train.tp_comm_overlap = run.tp_comm_overlap;
    spec.train.expert_load = run.expert_load;
    spec.train.expert_load_where = run.expert_load_range;
    spec.train.moe_dispatcher = run.moe_dispatcher;
    spec.train.cp_exchange = run.cp_exchange;
    spec.train.cp_exchange_where = run.cp_exchange_range;
    spec.train.kv_cache = run.kv_cache;
    spec.train.context = run.context;
    spec.train.where = run.range;
  }

  StrategySpec single_device_spec(const LogicalGraph& g) {
    StrategySpec spec;
    spec.name = strategy_.name + ".single_device";
    spec.mesh = ir::Mesh("world", {{"device", 1}});
    spec.resize_for(g.nodes.size(), g.tensors.size());
    run_config(spec);
    spec.train.cp_exchange = ContextParallelExchange::AllGather;  // one device: no ring to pass keys around
    // Which GEMMs run in FP8 is the model's arithmetic, not its layout.
    for (const frontend::ScheduleConfig& sc : strategy_.schedules)
      if (sc.fp8) (spec.schedule[sc.node] ? *spec.schedule[sc.node] : spec.schedule[sc.node].emplace()).fp8 = sc.fp8;
    return spec;
  }

  StrategySpec strategy_spec(const LogicalGraph& g) {
    StrategySpec spec;
    spec.name = strategy_.name;
    std::vector<ir::MeshAxis> axes;
    for (const frontend::MeshAxis& a : strategy_.mesh) axes.push_back({a.name, static_cast<int32_t>(a.size)});
    spec.mesh = ir::Mesh("world", axes);
    spec.resize_for(g.nodes.size(), g.tensors.size());
    run_config(spec);

    // Several configs on one node combine, a later one's keys over an
    // earlier one's (`**.attn.** schedule { fp8 = false }` and
    // `**.attn.core schedule { recompute = true }` both reach the core).
    for (const frontend::ScheduleConfig& sc : strategy_.schedules) {
      ScheduleConfig& c = spec.schedule[sc.node] ? *spec.schedule[sc.node] : spec.schedule[sc.node].emplace();
      if (sc.micro_batches) c.micro_batches = static_cast<int32_t>(*sc.micro_batches);
      if (sc.max_ongoing) c.max_ongoing = static_cast<int32_t>(*sc.max_ongoing);
      if (sc.recompute) c.recompute = sc.recompute;
      if (sc.fp8) c.fp8 = sc.fp8;
      if (sc.overlap_all_to_all) c.overlap_all_to_all = sc.overlap_all_to_all;
      // A built-in kind and a table are one key: the later replaces both.
      if (sc.kind || !sc.table.empty()) {
        c.kind = sc.kind;
        c.virtual_stages.reset();
        c.table.reset();
        if (sc.kind == schedule::ScheduleKind::Interleaved || (sc.kind && schedule::v_shaped(*sc.kind)) ||
            !sc.table.empty())
          c.virtual_stages = static_cast<int32_t>(sc.virtual_stages);
        if (!sc.table.empty()) c.table = sc.table;
      }
      // Where the schedule was set, for its diagnostics: not a config of fp8 alone.
      const bool schedules =
          sc.micro_batches || sc.max_ongoing || sc.recompute || sc.overlap_all_to_all || sc.kind || !sc.table.empty();
      if (schedules || !c.where.valid()) c.where = sc.range;
    }
    // Gradient accumulation: each optimizer step runs `accumulate` times as
    // many micro-batches over a batch that many times larger.
    if (strategy_.run.accumulate > 1) {
      ScheduleConfig& root = spec.schedule[0] ? *spec.schedule[0] : spec.schedule[0].emplace();
      root.micro_batches = static_cast<int32_t>(root.micro_batches.value_or(1) * strategy_.run.accumulate);
    }

    if (strategy_.default_compute) spec.default_compute = compute_config(*strategy_.default_compute);
    for (const frontend::ComputeConfig& c : strategy_.compute)
      if (!c.from_default) spec.compute[c.leaf] = compute_config(c);

    for (const frontend::MemoryConfig& m : strategy_.memory) {
      int32_t t = tensor(m.tensor);
      TensorLayoutConfig layout = layout_config(m.sbp, m.range);
      if (m.roles & frontend::kRoleParam) spec.memory[t].value = layout;
      if (m.roles & frontend::kRoleGrad) spec.memory[t].grad = layout;
      if (m.roles & frontend::kRoleOptimizer) spec.memory[t].optimizer = layout;
    }

    for (const frontend::CacheConfig& c : strategy_.caches) spec.cache[c.leaf] = layout_config(c.sbp, c.range);

    for (const frontend::TiedParams& tie : strategy_.ties)
      if (!tie.params.empty()) spec.memory[tensor(tie.params[0])].sharing = tie.mode;

    if (strategy_.pipeline.present) pipeline(g, spec);
    return spec;
  }

  // `pipeline X over pp` places X's children; the compiler cuts them into
  // ranks × virtual stages. Explicit stage lists place nodes directly.
  void pipeline(const LogicalGraph& g, StrategySpec& spec) {
    const frontend::PipelinePlacement& p = strategy_.pipeline;
    spec.pipeline.axis = static_cast<int32_t>(p.axis);
    spec.pipeline.where = p.range;
    int32_t parent = -2;
    for (const frontend::PipelineStage& st : p.stages) {
      if (st.nodes.empty()) continue;
      int32_t first = g.nodes[st.nodes.front()].parent;
      parent = parent == -2 || parent == first ? first : -1;
    }
    // Lists of one node's children are that node's pipeline (its schedule
    // drives it). The compiler cuts `pipeline X over pp` into stages itself;
    // written lists keep the placement the user wrote, however uneven.
    bool written = std::any_of(p.stages.begin(), p.stages.end(),
                               [&](const frontend::PipelineStage& st) { return st.range != p.range; });
    if (parent >= 0) spec.pipeline.node = parent;
    if (parent >= 0 && !written) return;
    spec.pipeline.stage_of_node.assign(g.nodes.size(), -1);
    for (const frontend::PipelineStage& st : p.stages)
      for (frontend::NodeId n : st.nodes) spec.pipeline.stage_of_node[n] = static_cast<int32_t>(st.index);
  }

  const frontend::Strategy& strategy_;
  const frontend::Model& model_;
  DiagnosticEngine& diags_;
  LogicalGraph graph_;
  std::vector<int32_t> tensor_map_;
  bool ok_ = true;
};

}  // namespace

std::optional<LogicalProgram> build_logical_program(const frontend::Strategy& strategy, DiagnosticEngine& diags) {
  return LogicalGraphBuilder(strategy, diags).run(false);
}

std::optional<LogicalProgram> build_single_device_program(const frontend::Strategy& strategy, DiagnosticEngine& diags) {
  return LogicalGraphBuilder(strategy, diags).run(true);
}

}  // namespace dstc::compiler
