#include "compiler/driver/search_memory_probe.h"

#include <vector>

#include "compiler/lowering/lowering.h"
#include "compiler/strategy/strategy_tree.h"
#include "htae/simulator.h"

namespace dstc::search {
namespace {

// Shrinks a bridged program's batch to `micro_batches` micro-batches of the
// size it has with `planned_micro_batches`, and restores it when destroyed.
class FewerMicroBatches {
 public:
  FewerMicroBatches(compiler::BridgedProgram& bridged, int32_t planned_micro_batches, int32_t micro_batches)
      : bridged_(bridged) {
    for (compiler::Tensor& t : bridged_.graph.tensors) {
      if (t.batch_axis < 0) continue;
      int64_t& size = t.dims[t.batch_axis].size;
      batch_sizes_.push_back(size);
      size = size / planned_micro_batches * micro_batches;
    }
    for (std::optional<compiler::ScheduleConfig>& c : bridged_.spec.schedule) {
      micro_batch_configs_.push_back(c ? c->micro_batches : std::nullopt);
      if (c && c->micro_batches) c->micro_batches = micro_batches;
    }
  }
  ~FewerMicroBatches() {
    size_t next = 0;
    for (compiler::Tensor& t : bridged_.graph.tensors) {
      if (t.batch_axis >= 0) t.dims[t.batch_axis].size = batch_sizes_[next++];
    }
    for (size_t n = 0; n < bridged_.spec.schedule.size(); ++n) {
      if (bridged_.spec.schedule[n]) bridged_.spec.schedule[n]->micro_batches = micro_batch_configs_[n];
    }
  }
  FewerMicroBatches(const FewerMicroBatches&) = delete;
  FewerMicroBatches& operator=(const FewerMicroBatches&) = delete;

 private:
  compiler::BridgedProgram& bridged_;
  std::vector<int64_t> batch_sizes_;
  std::vector<std::optional<int32_t>> micro_batch_configs_;
};

}  // namespace

std::optional<int32_t> fewest_micro_batches(const compiler::ResolvedStrategy& resolved) {
  const compiler::ResolvedSchedule& schedule = resolved.schedule[resolved.schedule_node];
  if (schedule.table) return std::nullopt;
  // The interleaved schedule needs a multiple of the pipeline ranks.
  int32_t fewest = schedule.kind == schedule::ScheduleKind::Interleaved ? resolved.pipeline_ranks : 1;
  if (resolved.micro_batches <= fewest) return std::nullopt;
  return fewest;
}

std::optional<htae::MemoryLowerBound> memory_bound_exceeding(compiler::BridgedProgram& bridged,
                                                             const compiler::PlannedStrategy& planned,
                                                             int32_t micro_batches, const htae::ClusterSpec& cluster,
                                                             SourceManager& sources) {
  FewerMicroBatches probe(bridged, planned.resolved.micro_batches, micro_batches);
  DiagnosticEngine diags(sources);
  std::optional<compiler::ResolvedStrategy> resolved =
      compiler::resolve_strategy(bridged.graph, bridged.spec, sources, diags);
  if (!resolved) return std::nullopt;
  ir::Module module = compiler::lower_to_ir(bridged.graph, bridged.spec, planned.sbp, *resolved, sources);
  return memory_bound_exceeding(module, cluster);
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
