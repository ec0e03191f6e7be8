#include "compiler/compile_strategy.h"

namespace dstc::compiler {

std::optional<CompiledStrategy> compile_strategy(const LogicalGraph& graph, const StrategySpec& spec,
                                                 SourceManager& sources, DiagnosticEngine& diags) {
  std::optional<ResolvedStrategy> resolved = resolve_strategy(graph, spec, sources, diags);
  if (!resolved) return std::nullopt;
  size_t errors_before = diags.error_count();
  SbpAssignment sbp = assign_sbp(graph, spec, {spec.pipeline.axis, resolved->micro_batches}, diags);
  if (diags.error_count() != errors_before) return std::nullopt;
  ir::Module module = lower_to_ir(graph, spec, sbp, *resolved, sources);
  return CompiledStrategy{std::move(*resolved), std::move(sbp), std::move(module)};
}

}  // namespace dstc::compiler
