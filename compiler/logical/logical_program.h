// What the logical graph builder hands to planning: the model as a logical
// graph and the strategy as a spec over it, with the figures throughput is
// counted in.
#pragma once

#include <cstdint>
#include <optional>

#include "compiler/logical/logical_graph.h"
#include "compiler/strategy/strategy_spec.h"

namespace dstc::compiler {

struct LogicalProgram {
  LogicalGraph graph;
  StrategySpec spec;
  // For throughput figures: samples per optimizer step (the global batch
  // times the accumulation steps), and tokens per sample for models whose
  // input is [batch, s or seq, ...] with more than one token (else none).
  int64_t samples_per_step = 0;
  std::optional<int64_t> tokens_per_sample = std::nullopt;
};

}  // namespace dstc::compiler
