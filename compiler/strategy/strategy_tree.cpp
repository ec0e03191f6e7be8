#include "compiler/strategy/strategy_tree.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/schedule/schedule_check.h"
#include "compiler/schedule/schedule_csv.h"
#include "compiler/schedule/schedule_generators.h"
#include "compiler/strategy/expert_load.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::compiler {
namespace {

std::vector<ResolvedSchedule> inherit_schedules(const LogicalGraph& graph, const StrategySpec& spec) {
  std::vector<ResolvedSchedule> resolved(graph.nodes.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    int32_t parent = graph.nodes[n].parent;
    ResolvedSchedule r = parent >= 0 ? resolved[parent] : ResolvedSchedule{};
    if (n < spec.schedule.size() && spec.schedule[n]) {
      const ScheduleConfig& c = *spec.schedule[n];
      if (c.micro_batches) r.micro_batches = *c.micro_batches;
      if (c.max_ongoing) r.max_ongoing = *c.max_ongoing;
      if (c.recompute) r.recompute = *c.recompute;
      if (c.fp8) r.fp8 = *c.fp8;
      if (c.overlap_all_to_all) r.overlap_all_to_all = *c.overlap_all_to_all;
      if (c.kind) r.kind = *c.kind;
      if (c.virtual_stages) r.virtual_stages = *c.virtual_stages;
      if (c.table) r.table = c.table;
      // The nearest node that set the schedule (fp8 is the arithmetic's).
      if (c.micro_batches || c.max_ongoing || c.recompute || c.overlap_all_to_all || c.kind || c.table)
        r.set_at = static_cast<int32_t>(n);
    }
    resolved[n] = r;
  }
  return resolved;
}

// Recomputation replays one unit at a time, so only the units' inputs live
// from forward to backward (Megatron's full recomputation checkpoints each
// transformer layer): the outermost layer of a repeat above the op, else
// the op's top-level node.
std::vector<int32_t> recompute_units(const LogicalGraph& graph, const std::vector<ResolvedSchedule>& schedule) {
  std::vector<int32_t> unit(graph.ops.size(), -1);
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    int32_t node = graph.ops[op].node;
    if (!schedule[node].recompute) continue;
    int32_t top = node, layer = -1;
    for (int32_t n = node; n >= 0 && graph.nodes[n].parent >= 0; n = graph.nodes[n].parent) {
      if (graph.nodes[n].repeated) layer = n;
      top = n;
    }
    unit[op] = layer >= 0 ? layer : top;
  }
  return unit;
}

// The child of `ancestor` whose subtree holds `node`, or -1.
int32_t child_towards(const LogicalGraph& graph, int32_t ancestor, int32_t node) {
  for (int32_t n = node; n >= 0; n = graph.nodes[n].parent)
    if (graph.nodes[n].parent == ancestor) return n;
  return -1;
}

SourceRange config_range(const StrategySpec& spec, int32_t node) {
  return node >= 0 && node < static_cast<int32_t>(spec.schedule.size()) && spec.schedule[node]
             ? spec.schedule[node]->where
             : SourceRange{};
}

// The strategy's expert_load file, a row of counts per dispatch op.
bool read_expert_loads(const LogicalGraph& graph, const StrategySpec& spec, SourceManager& sources,
                       DiagnosticEngine& diags, ResolvedStrategy& out) {
  std::vector<int32_t> dispatches;
  std::vector<int64_t> experts;
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    const LogicalOp& o = graph.ops[op];
    if (o.type != ops::OpKind::Dispatch) continue;
    dispatches.push_back(static_cast<int32_t>(op));
    experts.push_back(graph.tensors[o.inputs[1].tensor].dims.back().size);
  }
  if (dispatches.empty()) {
    diags.error(diag::kExpertLoad, spec.train.expert_load_where,
                "expert_load gives tokens per expert, but the model routes no tokens to experts (it has no dispatch)");
    return false;
  }
  std::string error;
  std::optional<FileId> file = sources.load(spec.train.expert_load, error);
  if (!file) {
    diags.error(diag::kExpertLoad, spec.train.expert_load_where,
                fmt::format("cannot read the expert load file '{}': {}", spec.train.expert_load, error));
    return false;
  }
  auto rows = read_expert_load(*file, experts, spec.train.expert_load_where, diags);
  if (!rows) return false;
  out.expert_load.assign(graph.ops.size(), {});
  for (size_t i = 0; i < dispatches.size(); ++i) out.expert_load[dispatches[i]] = std::move((*rows)[i]);
  return true;
}

}  // namespace

std::optional<ResolvedStrategy> resolve_strategy(const LogicalGraph& graph, const StrategySpec& spec,
                                                 SourceManager& sources, DiagnosticEngine& diags,
                                                 const PlanOptions& options) {
  size_t errors_before = diags.error_count();
  ResolvedStrategy out;
  out.schedule = inherit_schedules(graph, spec);
  out.recompute_unit = recompute_units(graph, out.schedule);
  const bool pipelined = spec.pipeline.axis >= 0;
  // The pipelined node's schedule drives the pipeline; explicit stage lists
  // (and no pipeline) take the root's.
  out.schedule_node = pipelined && spec.pipeline.node >= 0 ? spec.pipeline.node : 0;
  ResolvedSchedule& root = out.schedule[out.schedule_node];
  if (options.micro_batches) root.micro_batches = *options.micro_batches;
  out.batch_splits = root.micro_batches;
  if (options.micro_batches_run) root.micro_batches = *options.micro_batches_run;
  out.micro_batches = root.micro_batches;
  SourceRange schedule_where = config_range(spec, root.set_at);

  for (int32_t t : graph.inputs) {
    const Tensor& in = graph.tensors[t];
    if (in.batch_axis >= 0 && in.dims[in.batch_axis].size % out.batch_splits != 0) {
      diags
          .error(diag::kMicroBatches, schedule_where,
                 fmt::format("{} micro-batches do not divide the batch of {} ({} samples)", out.batch_splits, in.name,
                             in.dims[in.batch_axis].size))
          .note(in.where, "the input is declared here");
      break;
    }
  }

  if (!pipelined && root.virtual_stages != 1) {
    diags.error(
        dstc::diag::kScheduleUnavailable, schedule_where,
        fmt::format("{} places {} stages on each pipeline rank, but the strategy has no pipeline",
                    root.table ? "the schedule table" : schedule::schedule_kind_name(root.kind), root.virtual_stages));
    return std::nullopt;
  }

  // Stages: the pipelined node's children, cut into contiguous groups.
  out.stage_of_op.assign(graph.ops.size(), 0);
  if (pipelined && !spec.pipeline.stage_of_node.empty()) {
    // Explicit stages: each op runs on its nearest placed ancestor's stage;
    // with V virtual stages the lists number ranks x V stages.
    out.pipeline_ranks = spec.mesh.axes()[spec.pipeline.axis].size;
    out.num_stages = out.pipeline_ranks * root.virtual_stages;
    int32_t last = *std::max_element(spec.pipeline.stage_of_node.begin(), spec.pipeline.stage_of_node.end());
    if (last >= out.num_stages) {
      auto error = diags.error(diag::kBadPipeline, spec.pipeline.where,
                               fmt::format("stage {} is placed, but the schedule that drives this pipeline has {} "
                                           "stages ({} ranks x {} virtual)",
                                           last, out.num_stages, out.pipeline_ranks, root.virtual_stages));
      if (schedule_where.valid()) error.note(schedule_where, "the schedule that drives it");
      return std::nullopt;
    }
    int32_t current = 0;
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      for (int32_t n = graph.ops[op].node; n >= 0; n = graph.nodes[n].parent) {
        if (spec.pipeline.stage_of_node[n] >= 0) {
          current = spec.pipeline.stage_of_node[n];
          break;
        }
      }
      out.stage_of_op[op] = current;
    }
  } else if (pipelined) {
    out.pipeline_ranks = spec.mesh.axes()[spec.pipeline.axis].size;
    out.num_stages = out.pipeline_ranks * root.virtual_stages;
    const std::vector<int32_t>& children = graph.nodes[spec.pipeline.node].children;
    int32_t n = static_cast<int32_t>(children.size());
    if (n < out.num_stages) {
      diags
          .error(diag::kPipelineTooFewLayers, spec.pipeline.where,
                 fmt::format("the pipeline has {} stages but '{}' has only {} children to place on them",
                             out.num_stages, graph.nodes[spec.pipeline.node].path, n))
          .note(graph.nodes[spec.pipeline.node].where, "the pipelined node is declared here")
          .note(fmt::format("fewer stages (pipeline ranks x virtual stages), or written stage lists, which may "
                            "leave stages empty as Megatron-Core's pipeline layouts do: `pipeline over {} {{ 0: ... "
                            "1: ... }}` (docs/schedules.md)",
                            spec.mesh.axes()[spec.pipeline.axis].name));
      return std::nullopt;
    }
    std::vector<int32_t> stage_of_child(graph.nodes.size(), -1);
    for (int32_t i = 0, first = 0; i < out.num_stages; ++i) {
      int32_t count = n / out.num_stages + (i < n % out.num_stages ? 1 : 0);
      for (int32_t c = first; c < first + count; ++c) stage_of_child[children[c]] = i;
      first += count;
    }
    bool seen_pipeline = false;
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      int32_t child = child_towards(graph, spec.pipeline.node, graph.ops[op].node);
      if (child >= 0) {
        out.stage_of_op[op] = stage_of_child[child];
        seen_pipeline = true;
      } else {
        out.stage_of_op[op] = seen_pipeline ? out.num_stages - 1 : 0;
      }
    }
  }

  // Without experts there is nothing to pair at: the option is off, as said.
  if (root.overlap_all_to_all && std::none_of(graph.ops.begin(), graph.ops.end(),
                                              [](const LogicalOp& o) { return o.type == ops::OpKind::Dispatch; })) {
    diags.warning(dstc::diag::kOverlapWithoutExperts, schedule_where,
                  "overlap_all_to_all pairs passes at their expert all-to-alls, and this model routes no tokens to "
                  "experts: the schedule runs as if it were off");
    root.overlap_all_to_all = false;
  }
  // Megatron-Core pairs a forward with another micro-batch's backward only
  // without a pipeline or with interleaving, DualPipeV by its design: under
  // plain 1F1B the paired forward's output is what the next stage's paired
  // backward waits behind, so the stages would take turns instead of
  // running at once.
  if (root.overlap_all_to_all && out.pipeline_ranks > 1 && root.kind != schedule::ScheduleKind::Interleaved &&
      (root.kind != schedule::ScheduleKind::DualPipeV || root.table)) {
    diags
        .error(dstc::diag::kScheduleUnavailable, schedule_where,
               fmt::format("overlap_all_to_all pairs forwards and backwards across stages only with interleaving "
                           "or dualpipe_v; this pipeline has {} ranks and runs {}",
                           out.pipeline_ranks,
                           root.table ? std::string("a schedule table") : schedule::schedule_kind_name(root.kind)))
        .note(
            "write kind = interleaved(V), as Megatron-Core requires virtual pipeline stages for "
            "--overlap-moe-expert-parallel-comm when the pipeline has more than one rank, or kind = dualpipe_v");
    return std::nullopt;
  }

  // The schedule table.
  schedule::PipelineDims dims{out.pipeline_ranks, root.virtual_stages, out.micro_batches};
  std::optional<schedule::ScheduleTable> table;
  if (root.table) {
    // The front end found the file beside the strategy that names it.
    std::string error;
    std::optional<FileId> file = sources.load(*root.table, error);
    if (!file) {
      diags.error(diag::kScheduleTableUnreadable, schedule_where,
                  fmt::format("cannot read the schedule table '{}': {}", *root.table, error));
      return std::nullopt;
    }
    table = schedule::read_schedule_csv(*file, dims, diags);
  } else {
    auto generated =
        schedule::generate_schedule({root.kind, out.pipeline_ranks, root.virtual_stages, out.micro_batches,
                                     root.max_ongoing, !spec.train.training, root.overlap_all_to_all ? 1 : 0});
    if (auto* message = std::get_if<std::string>(&generated)) {
      diags.error(dstc::diag::kScheduleUnavailable, schedule_where,
                  fmt::format("cannot build the schedule: {}", *message));
      return std::nullopt;
    }
    table = std::get<schedule::ScheduleTable>(std::move(generated));
  }
  // Interleaving, ZB-V and DualPipeV keep more chunk-forwards in flight by
  // design (the warm-ups are Megatron-LM's and DualPipeV's; ZB-V's
  // max_ongoing bounds its first chunk's); max_ongoing bounds the other
  // schedules.
  const bool own_warmup = root.kind == schedule::ScheduleKind::Interleaved || schedule::v_shaped(root.kind);
  int32_t max_ongoing = own_warmup && !root.table ? 0 : root.max_ongoing;
  if (!table ||
      !schedule::check_schedule(*table, {!spec.train.training, max_ongoing, schedule_where, schedule_where}, diags))
    return std::nullopt;
  out.table = std::move(*table);
  if (!spec.train.expert_load.empty() && !read_expert_loads(graph, spec, sources, diags, out)) return std::nullopt;
  if (diags.error_count() != errors_before) return std::nullopt;
  return out;
}

}  // namespace dstc::compiler
