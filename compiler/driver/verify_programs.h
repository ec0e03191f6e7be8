// The two programs `dstc verify` runs: the strategy's and the same model's
// on one device, compiled from one request (file, strategy, -D values).
#pragma once

#include <optional>

#include "backends/reference/work_estimate.h"
#include "compiler/compile_strategy.h"
#include "compiler/logical/build_logical_graph.h"
#include "compiler/pipeline/load_strategy.h"

namespace dstc {

struct VerifyPrograms {
  LoadedStrategy loaded;
  compiler::LogicalProgram distributed, single;
  compiler::CompiledStrategy compiled, reference;
  // The single-device program runs the strategy's micro-batches when the
  // model takes statistics per micro-batch (a batch norm, a load-balancing
  // loss: reference::reference_micro_batches), else 1.
  int32_t reference_micro_batches = 1;

  const frontend::Strategy& strategy() const { return loaded.strategy->strategy; }
  // What running both costs on the reference executor.
  reference::ProgramWork single_work() const;
  reference::ProgramWork strategy_work() const;
};

// nullopt when the files have errors or the strategy cannot be compiled
// (reported to `diags`; an inference strategy is an error here). `internal`
// is set when the compiler produced IR that does not verify.
std::optional<VerifyPrograms> compile_verify_programs(const StrategyRequest& request, SourceManager& sources,
                                                      DiagnosticEngine& diags, bool& internal);

}  // namespace dstc
