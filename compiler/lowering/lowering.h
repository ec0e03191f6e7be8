// Lowering a resolved strategy to explicit-schedule IR: one function,
// `step`, holding one training (or inference) step of every device.
//
// Each op of the logical graph runs on its pipeline stage's slice of the
// mesh with its SBP signature; where a tensor's layout differs from what a
// consumer reads, boxing inserts the transfer. Backward mirrors forward:
// each op's gradient ops use the dual signature, and the backward of a
// boxing step is the boxing between the dual layouts. Parameters are stored
// in their memory layout, their gradients accumulate over micro-batches in
// the gradient layout and reach the optimizer in the optimizer layout, so
// data-parallel all-reduce and ZeRO 1/2/3 are boxing too. The function's op
// order follows the pipeline schedule table, step by step.
#pragma once

#include "compiler/logical/logical_program.h"
#include "compiler/sbp/sbp_propagation.h"
#include "compiler/strategy/strategy_spec.h"
#include "compiler/strategy/strategy_tree.h"
#include "ir/module.h"

namespace dstc::compiler {

// What planning hands to lowering: the program, its resolved strategy tree
// and its SBP plan. Every error a strategy can have is found by here
// (lowering reports none).
struct PlannedStrategy {
  const LogicalProgram* program = nullptr;  // what was planned; outlives the plan
  ResolvedStrategy resolved;
  SbpAssignment sbp;
};

// `sources` names the files of the IR's locations.
ir::Module lower_to_ir(const PlannedStrategy& plan, const SourceManager& sources);

}  // namespace dstc::compiler
