// The compiler's middle end in one call: resolve the strategy tree, assign
// SBP signatures, and lower to IR.
#pragma once

#include <optional>

#include "compiler/logical/logical_graph.h"
#include "compiler/lowering/lowering.h"
#include "compiler/sbp/sbp_propagation.h"
#include "compiler/strategy/strategy_spec.h"
#include "compiler/strategy/strategy_tree.h"
#include "ir/module.h"

namespace dstc::compiler {

// The strategy checked and planned, not yet lowered: every error a strategy
// can have is found by here (lowering reports none).
struct PlannedStrategy {
  ResolvedStrategy resolved;
  SbpAssignment sbp;
};

struct CompiledStrategy {
  ResolvedStrategy resolved;
  SbpAssignment sbp;
  ir::Module module;
};

// nullopt when the strategy has errors (reported to `diags`).
std::optional<PlannedStrategy> plan_strategy(const LogicalGraph& graph, const StrategySpec& spec,
                                             SourceManager& sources, DiagnosticEngine& diags,
                                             const PlanOptions& options = {});
std::optional<CompiledStrategy> compile_strategy(const LogicalGraph& graph, const StrategySpec& spec,
                                                 SourceManager& sources, DiagnosticEngine& diags,
                                                 const PlanOptions& options = {});
// Lowers what plan_strategy returned.
CompiledStrategy lower_planned(const LogicalGraph& graph, const StrategySpec& spec, PlannedStrategy planned,
                               const SourceManager& sources);

}  // namespace dstc::compiler
