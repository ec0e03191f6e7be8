#include "compiler/pipeline/load_strategy.h"

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"

namespace dstc {

std::optional<htae::ClusterSpec> load_strategy_cluster(const frontend::CheckedStrategy& checked,
                                                       const std::string& cluster_override, SourceManager& sources,
                                                       DiagnosticEngine& diags) {
  const frontend::ClusterReference& ref = checked.strategy.cluster;
  std::string path = cluster_override.empty() ? ref.resolved : cluster_override;
  if (path.empty()) {
    frontend::report_missing_cluster(ref, diags);
    return std::nullopt;
  }
  htae::ClusterOverrides overrides;
  overrides.nodes = ref.nodes;
  std::optional<htae::ClusterSpec> cluster = htae::load_cluster(sources, diags, path, overrides);
  if (!cluster) return std::nullopt;
  size_t errors_before = diags.error_count();
  frontend::check_against_cluster(checked, {cluster->num_devices(), cluster->gpu.memory_bytes}, diags);
  if (diags.error_count() != errors_before) return std::nullopt;
  return cluster;
}

std::optional<LoadedStrategy> load_strategy(const StrategyRequest& request, SourceManager& sources,
                                            DiagnosticEngine& diags) {
  LoadedStrategy out;
  out.front = frontend::check_files({request.file}, request.defines, sources, diags, request.strategy);
  if (diags.has_errors()) return std::nullopt;
  const auto& all = out.front->strategies;
  if (!request.strategy.empty()) {
    out.strategy = out.front->find_strategy(request.strategy);
    if (!out.strategy) {
      std::string names;
      for (const frontend::CheckedStrategy& s : all) names += (names.empty() ? "" : ", ") + s.strategy.name;
      diags
          .error(diag::kUnknownStrategy, {},
                 fmt::format("'{}' declares no strategy '{}'", request.file, request.strategy))
          .note(names.empty() ? "it declares no strategy" : "it declares: " + names);
      return std::nullopt;
    }
  } else if (all.size() == 1) {
    out.strategy = &all.front();
  } else {
    std::string names;
    for (const frontend::CheckedStrategy& s : all) names += (names.empty() ? "" : ", ") + s.strategy.name;
    diags
        .error(diag::kUnknownStrategy, {},
               all.empty()
                   ? fmt::format("'{}' declares no strategy to compile", request.file)
                   : fmt::format("'{}' declares {} strategies; name one with --strategy", request.file, all.size()))
        .note(names.empty() ? "a strategy is declared with `strategy NAME(...) for MODEL on \"cluster.toml\" { ... }`"
                            : "it declares: " + names);
    return std::nullopt;
  }
  std::optional<htae::ClusterSpec> cluster = load_strategy_cluster(*out.strategy, request.cluster, sources, diags);
  if (!cluster) return std::nullopt;
  out.cluster = std::move(*cluster);
  return out;
}

htae::SimOptions simulation_options(const compiler::LogicalProgram& program) {
  htae::SimOptions options;
  options.global_batch = program.samples_per_step;
  options.sequence_length = program.tokens_per_sample;
  return options;
}

}  // namespace dstc
