#include "compiler/compile_strategy.h"

namespace dstc::compiler {

std::optional<PlannedStrategy> plan_strategy(const LogicalProgram& program, SourceManager& sources,
                                             DiagnosticEngine& diags, const PlanOptions& options) {
  std::optional<ResolvedStrategy> resolved = resolve_strategy(program.graph, program.spec, sources, diags, options);
  if (!resolved) return std::nullopt;
  size_t errors_before = diags.error_count();
  SbpAssignment sbp =
      assign_sbp(program.graph, program.spec, {program.spec.pipeline.axis, resolved->batch_splits}, diags);
  if (diags.error_count() != errors_before) return std::nullopt;
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
