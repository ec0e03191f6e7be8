// The compiler's middle end: a logical program planned (strategy tree
// resolved, SBP signatures assigned), then lowered to IR; each step takes
// the value the one before it gives.
#pragma once

#include <optional>

#include "compiler/logical/logical_program.h"
#include "compiler/lowering/lowering.h"
#include "compiler/sbp/sbp_propagation.h"
#include "compiler/strategy/strategy_spec.h"
#include "compiler/strategy/strategy_tree.h"
#include "ir/module.h"

namespace dstc::compiler {

struct CompiledStrategy {
  ResolvedStrategy resolved;
  SbpAssignment sbp;
  ir::Module module;
};

// Planning: the strategy tree resolved and SBP assigned. nullopt when the
// strategy has errors (reported to `diags`). The plan points at `program`.
std::optional<PlannedStrategy> plan_strategy(const LogicalProgram& program, SourceManager& sources,
                                             DiagnosticEngine& diags, const PlanOptions& options = {});
// Lowers what plan_strategy returned.
CompiledStrategy lower_planned(PlannedStrategy planned, const SourceManager& sources);
// Both.
std::optional<CompiledStrategy> compile_strategy(const LogicalProgram& program, SourceManager& sources,
                                                 DiagnosticEngine& diags, const PlanOptions& options = {});

}  // namespace dstc::compiler
