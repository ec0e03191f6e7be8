#include "compiler/compile_strategy.h"

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"

namespace dstc::compiler {

namespace {

// Whether some attention reads its queries split along the sequence on a
// mesh axis and its keys whole there: context parallelism's exchange.
bool gathers_keys_for_context_parallelism(const LogicalGraph& graph, const SbpAssignment& sbp) {
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    if (graph.ops[op].type != ops::OpKind::Attention) continue;
    const auto sequence = static_cast<uint8_t>(graph.tensors[graph.ops[op].inputs[0].tensor].dims.size() - 2);
    for (const AxisSignature& axis : sbp.ops[op].axes)
      if (axis.inputs[0] == split(sequence) && axis.inputs[1] == kBroadcast) return true;
  }
  return false;
}

// memory(cache) splits the positions of a KV cache over axes where every
// rank reads the step's keys whole. Where the ranks hold the same queries
// (decode), each attends over its shard and the shards' states merge;
// where they split the queries' sequence (a context-parallel prefill),
// each attends over every position and stores its share, so there must be
// no earlier positions to read.
bool caches_fit_their_attention(const LogicalGraph& graph, const StrategySpec& spec, const SbpAssignment& sbp,
                                DiagnosticEngine& diags) {
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    const LogicalOp& attention = graph.ops[op];
    if (attention.type != ops::OpKind::Attention) continue;
    const std::optional<TensorLayoutConfig>& cache = spec.cache[static_cast<size_t>(attention.node)];
    if (!cache) continue;
    if (!spec.train.kv_cache) {
      diags.error(diag::kBadConfig, cache->where,
                  "memory(cache) lays out attention's KV caches, and this strategy keeps none: set "
                  "`inference { kv_cache = true }`");
      return false;
    }
    const std::string& leaf = graph.nodes[static_cast<size_t>(attention.node)].path;
    const auto sequence = static_cast<int>(graph.tensors[attention.inputs[0].tensor].dims.size()) - 2;
    std::string shared_queries, split_queries;  // an axis of each kind
    for (size_t a = 0; a < cache->layout.size(); ++a) {
      if (!(cache->written >> a & 1u) || cache->layout[a].kind != ir::Sbp::Split) continue;
      const AxisSignature& axis = sbp.ops[op].axes[a];
      const std::string& name = spec.mesh.axes()[a].name;
      if (spec.mesh.axes()[a].size == 1) continue;  // one rank holds every position
      if (axis.inputs[1] != kBroadcast) {
        diags.error(diag::kCacheLayout, cache->where,
                    fmt::format("{}'s KV cache splits its positions over '{}', where its keys are {}: a cache "
                                "splits its positions over an axis whose ranks hold the step's keys whole",
                                leaf, name, to_string(axis.inputs[1])));
        return false;
      }
      (axis.inputs[0] == split(sequence) ? split_queries : shared_queries) = name;
    }
    if (!split_queries.empty() && spec.train.context > 0) {
      diags
          .error(diag::kCacheLayout, cache->where,
                 fmt::format("{} splits its queries' sequence over '{}' (context parallelism) after {} cached "
                             "positions, and every query reads all of them, while each '{}' rank holds a share",
                             leaf, split_queries, spec.train.context, split_queries))
          .note(
              "a prefill (context = 0) may split its cache over the axis that splits its sequence; a decode "
              "step splits it over an axis whose ranks hold the same queries");
      return false;
    }
    if (!split_queries.empty() && !shared_queries.empty()) {
      diags.error(diag::kCacheLayout, cache->where,
                  fmt::format("{}'s KV cache splits its positions over '{}', which splits the queries' sequence, "
                              "and over '{}', which does not: split it over axes of one kind",
                              leaf, split_queries, shared_queries));
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<PlannedStrategy> plan_strategy(const LogicalProgram& program, SourceManager& sources,
                                             DiagnosticEngine& diags, const PlanOptions& options) {
  std::optional<ResolvedStrategy> resolved = resolve_strategy(program.graph, program.spec, sources, diags, options);
  if (!resolved) return std::nullopt;
  size_t errors_before = diags.error_count();
  SbpAssignment sbp =
      assign_sbp(program.graph, program.spec, {program.spec.pipeline.axis, resolved->batch_splits}, diags);
  if (diags.error_count() != errors_before) return std::nullopt;
  if (!caches_fit_their_attention(program.graph, program.spec, sbp, diags)) return std::nullopt;
  if (program.spec.train.cp_exchange == ContextParallelExchange::Ring &&
      !gathers_keys_for_context_parallelism(program.graph, sbp))
    diags.warning(diag::kRingWithoutContextParallelism, program.spec.train.cp_exchange_where,
                  "cp_comm_type = p2p passes keys and values around the ranks of a split sequence, and no attention "
                  "here splits its queries' sequence over a mesh axis with its keys whole: nothing goes round a ring");
  return PlannedStrategy{&program, std::move(*resolved), std::move(sbp)};
}

CompiledStrategy lower_planned(PlannedStrategy planned, const SourceManager& sources) {
  ir::Module module = lower_to_ir(planned, sources);
  return CompiledStrategy{std::move(planned.resolved), std::move(planned.sbp), std::move(module)};
}

std::optional<CompiledStrategy> compile_strategy(const LogicalProgram& program, SourceManager& sources,
                                                 DiagnosticEngine& diags, const PlanOptions& options) {
  std::optional<PlannedStrategy> planned = plan_strategy(program, sources, diags, options);
  if (!planned) return std::nullopt;
  return lower_planned(std::move(*planned), sources);
}

}  // namespace dstc::compiler
