// What every command that starts from a strategy does first: check the
// files, pick the strategy, load its cluster and check the mesh fits it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/frontend.h"
#include "compiler/logical/build_logical_graph.h"
#include "htae/cluster_spec.h"
#include "htae/simulator.h"

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

// What the simulator needs of a program beyond its IR: samples per step
// and tokens per sample, for throughput.
htae::SimOptions simulation_options(const compiler::LogicalProgram& program);

}  // namespace dstc
