#include "compiler/compile_strategy.h"

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

}  // namespace

std::optional<PlannedStrategy> plan_strategy(const LogicalProgram& program, SourceManager& sources,
                                             DiagnosticEngine& diags, const PlanOptions& options) {
  std::optional<ResolvedStrategy> resolved = resolve_strategy(program.graph, program.spec, sources, diags, options);
  if (!resolved) return std::nullopt;
  size_t errors_before = diags.error_count();
  SbpAssignment sbp =
      assign_sbp(program.graph, program.spec, {program.spec.pipeline.axis, resolved->batch_splits}, diags);
  if (diags.error_count() != errors_before) return std::nullopt;
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
