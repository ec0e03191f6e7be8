// What every command that starts from a strategy does first: check the
// files, pick the strategy, load its cluster and check the mesh fits it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/frontend.h"
#include "htae/cluster_spec.h"

namespace dstc {

struct LoadedStrategy {
  std::unique_ptr<frontend::FrontendResult> front;
  const frontend::CheckedStrategy* strategy = nullptr;
  htae::ClusterSpec cluster;
};

struct StrategyRequest {
  std::string file;
  std::string strategy;  // empty: the file's only strategy
  std::vector<std::string> defines;
  std::string cluster;  // empty: the strategy's own cluster file
};

// nullopt when anything has errors (reported to `diags`).
std::optional<LoadedStrategy> load_strategy(const StrategyRequest& request, SourceManager& sources,
                                            DiagnosticEngine& diags);

// The cluster a strategy names (its node-count override applied), checked
// against the strategy's mesh; nullopt and diagnostics when it is missing,
// invalid or too small.
std::optional<htae::ClusterSpec> load_strategy_cluster(const frontend::CheckedStrategy& strategy,
                                                       const std::string& cluster_override, SourceManager& sources,
                                                       DiagnosticEngine& diags);

// Tokens per sample for models with an input [batch, s, ...] (the second dim
// named `s` or `seq`), for the simulator's tokens/s; nullopt otherwise.
std::optional<int64_t> model_sequence_length(const frontend::Model& model);

}  // namespace dstc
