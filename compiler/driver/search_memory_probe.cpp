#include "compiler/driver/search_memory_probe.h"

#include "compiler/bridge/bridge.h"
#include "compiler/compile_strategy.h"
#include "htae/simulator.h"

namespace dstc::search {

std::optional<frontend::Strategy> fewest_micro_batches_form(const frontend::Strategy& strategy) {
  const frontend::ScheduleConfig* root = nullptr;
  for (const frontend::ScheduleConfig& sc : strategy.schedules) {
    if (sc.node == 0) root = &sc;
  }
  int64_t micro_batches = (root && root->micro_batches ? *root->micro_batches : 1) * strategy.run.accumulate;
  int64_t batch = strategy.run.batch * strategy.run.accumulate;
  // A table schedule names its micro-batches itself.
  if (root && root->kind == frontend::ScheduleKind::Table) return std::nullopt;
  // The interleaved schedule needs a multiple of the pipeline ranks.
  int64_t fewest = 1;
  if (root && root->kind == frontend::ScheduleKind::Interleaved && strategy.pipeline.present &&
      strategy.pipeline.axis < strategy.mesh.size()) {
    fewest = strategy.mesh[strategy.pipeline.axis].size;
  }
  if (micro_batches <= fewest || batch % micro_batches != 0) return std::nullopt;
  frontend::Strategy fewer = strategy;
  fewer.run.batch = batch / micro_batches * fewest;
  fewer.run.accumulate = 1;
  for (frontend::ScheduleConfig& sc : fewer.schedules) {
    if (sc.micro_batches) sc.micro_batches = fewest;
  }
  return fewer;
}

std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const frontend::Strategy& strategy,
                                                             const htae::ClusterSpec& cluster, SourceManager& sources) {
  DiagnosticEngine diags(sources);
  std::optional<compiler::BridgedProgram> bridged = compiler::bridge_strategy(strategy, diags);
  if (!bridged) return std::nullopt;
  std::optional<compiler::CompiledStrategy> compiled =
      compiler::compile_strategy(bridged->graph, bridged->spec, sources, diags);
  if (!compiled) return std::nullopt;
  return memory_bound_exceeding(compiled->module, cluster);
}

std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const ir::Module& module,
                                                             const htae::ClusterSpec& cluster) {
  const ir::Function* f = htae::find_function(module, {});
  if (!f) return std::nullopt;
  htae::MemoryLowerBound bound = htae::memory_lower_bound(module, *f);
  if (bound.bytes <= cluster.gpu.memory_bytes) return std::nullopt;
  return bound;
}

}  // namespace dstc::search
