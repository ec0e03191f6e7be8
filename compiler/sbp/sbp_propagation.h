// Choosing an SBP signature for every op on every mesh axis (Proteus §VII):
// the user's compute config on the op's layer first, then the strategy's
// default, then propagation along the data flow, which takes the cheapest
// signature given the layouts the inputs arrive in. Propagation keeps splits
// an input already carries and never invents new ones, and a partial output
// is charged the all-reduce it will need, so a replicated layout wins ties.
#pragma once

#include <vector>

#include "compiler/logical/logical_graph.h"
#include "compiler/sbp/signature.h"
#include "compiler/strategy/strategy_spec.h"
#include "ir/source/diagnostics.h"

namespace dstc::compiler {

enum class ConfigReason : uint8_t { User, Default, Propagated, Pipeline };
std::string_view reason_name(ConfigReason r);

struct OpSbp {
  std::vector<AxisSignature> axes;    // one per mesh axis
  std::vector<ConfigReason> reasons;  // one per mesh axis
};

struct SbpAssignment {
  std::vector<OpSbp> ops;
  // The layout each tensor is produced in; for inputs and parameters, the
  // layout they are stored in (their memory config on the axes it writes,
  // what their first consumer reads on the others).
  std::vector<ir::Layout> layouts;
  // Per parameter (empty for other tensors): where its accumulated gradient
  // and its optimizer state live. Defaults: the gradient is the dual of the
  // value's layout (partial where the value is replicated), the optimizer
  // state is laid out as the value; a memory config replaces the axes it
  // writes.
  std::vector<ir::Layout> grad_layouts, optimizer_layouts;
};

struct PropagationOptions {
  int32_t pipeline_axis = -1;  // always B: stages are placed on its slices
  int32_t micro_batches = 1;   // batch axes are divided by it before splitting
};

// Reports configs that cannot apply or do not divide; the assignment is
// complete either way (an invalid choice falls back to propagation).
SbpAssignment assign_sbp(const LogicalGraph& graph, const StrategySpec& spec, const PropagationOptions& options,
                         DiagnosticEngine& diags);

}  // namespace dstc::compiler
