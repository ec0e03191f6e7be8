#include "compiler/search/memory_probe.h"

#include <algorithm>
#include <vector>

#include "compiler/lowering/lowering.h"
#include "compiler/strategy/strategy_tree.h"
#include "htae/comm_buffers.h"
#include "htae/device_classes.h"
#include "htae/simulator.h"
#include "htae/topology.h"

namespace dstc::search {

std::optional<int32_t> fewest_micro_batches(const compiler::ResolvedStrategy& resolved) {
  const compiler::ResolvedSchedule& schedule = resolved.schedule[resolved.schedule_node];
  if (schedule.table) return std::nullopt;
  // The interleaved schedule needs a multiple of the pipeline ranks.
  int32_t fewest = schedule.kind == schedule::ScheduleKind::Interleaved ? resolved.pipeline_ranks : 1;
  if (resolved.micro_batches <= fewest) return std::nullopt;
  return fewest;
}

std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const compiler::LogicalProgram& logical,
                                                             const compiler::PlannedStrategy& planned,
                                                             int32_t micro_batches, const htae::ClusterSpec& cluster,
                                                             SourceManager& sources) {
  compiler::PlanOptions probe;
  probe.micro_batches_run = micro_batches;
  DiagnosticEngine diags(sources);
  std::optional<compiler::ResolvedStrategy> resolved =
      compiler::resolve_strategy(logical.graph, logical.spec, sources, diags, probe);
  if (!resolved) return std::nullopt;
  ir::Module module = compiler::lower_to_ir({&logical, std::move(*resolved), planned.sbp}, sources);
  // The configuration's own schedule says how many micro-batches are held.
  return memory_bound_exceeding(module, planned.resolved, logical.spec.pipeline.axis, cluster);
}

std::optional<htae::MemoryLowerBound> memory_bound_exceeding(const ir::Module& module,
                                                             const compiler::ResolvedStrategy& resolved,
                                                             int32_t pipeline_axis, const htae::ClusterSpec& cluster) {
  const ir::Function* f = htae::find_function(module, {});
  if (!f) return std::nullopt;
  // NCCL's and DeepEP's buffers, per rank.
  const htae::DeviceClasses classes(module, *f, true);
  const std::vector<int64_t> by_class = htae::comm_buffer_bytes(module, *f, classes, htae::Topology(cluster), cluster);
  std::vector<int64_t> held(static_cast<size_t>(module.mesh().size()), 0);
  for (size_t r = 0; r < held.size(); ++r) held[r] = by_class[classes.of_rank(static_cast<ir::Rank>(r))];
  htae::MemoryLowerBound bound =
      htae::memory_lower_bound(module, *f, micro_batches_held(module, resolved, pipeline_axis), held);
  if (bound.bytes <= cluster.gpu.memory_bytes) return std::nullopt;
  return bound;
}

std::vector<int64_t> micro_batches_held(const ir::Module& module, const compiler::ResolvedStrategy& resolved,
                                        int32_t pipeline_axis) {
  const schedule::ScheduleTable& table = resolved.table;
  std::vector<int64_t> held_by_rank(table.ranks.size(), 1);
  std::vector<int32_t> chunks_run(static_cast<size_t>(std::max(0, table.num_micro_batches)), 0);
  for (size_t rank = 0; rank < table.ranks.size(); ++rank) {
    // A micro-batch is held whole once the rank ran the forwards of all its stages.
    const int32_t chunks = std::max(1, table.stages_on(static_cast<int32_t>(rank)));
    std::fill(chunks_run.begin(), chunks_run.end(), 0);
    int64_t whole = 0;
    for (const schedule::Action& a : table.ranks[rank]) {
      if (a.kind != schedule::ActionKind::Forward) break;
      if (a.micro_batch >= 0 && static_cast<size_t>(a.micro_batch) < chunks_run.size() &&
          ++chunks_run[a.micro_batch] == chunks)
        ++whole;
    }
    held_by_rank[rank] = std::max<int64_t>(1, whole);
  }
  std::vector<int64_t> held(static_cast<size_t>(module.mesh().size()), 1);
  for (ir::Rank r = 0; r < module.mesh().size(); ++r) {
    size_t rank = pipeline_axis >= 0 ? static_cast<size_t>(module.mesh().coord(r, pipeline_axis)) : 0;
    if (rank < held_by_rank.size()) held[static_cast<size_t>(r)] = held_by_rank[rank];
  }
  return held;
}

}  // namespace dstc::search
