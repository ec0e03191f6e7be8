// The strategy tree resolved: schedule configs inherited top-down (a node
// takes its parent's unless it sets its own, Proteus §IV-B), pipeline
// stages assigned to the tree's leaves and so to every op, and the pipeline
// schedule table built and checked.
#pragma once

#include <optional>
#include <vector>

#include "compiler/logical/logical_graph.h"
#include "compiler/schedule/schedule_table.h"
#include "compiler/strategy/strategy_spec.h"
#include "ir/source/diagnostics.h"

namespace dstc::compiler {

// A node's schedule config after inheritance, with where each field came from.
struct ResolvedSchedule {
  int32_t micro_batches = 1;
  int32_t max_ongoing = 0;  // 0: the schedule's own limit
  bool recompute = false;
  bool fp8 = true;                  // under the run's FP8 recipe (frontend::ScheduleConfig)
  bool overlap_all_to_all = false;  // see frontend::ScheduleConfig
  schedule::ScheduleKind kind = schedule::ScheduleKind::OneFOneB;
  int32_t virtual_stages = 1;
  std::optional<std::string> table;
  int32_t set_at = -1;  // the nearest ancestor (or itself) that set a field; -1: defaults
};

struct ResolvedStrategy {
  std::vector<ResolvedSchedule> schedule;  // per tree node
  int32_t schedule_node = 0;               // the node whose schedule drives the pipeline
  std::vector<int32_t> stage_of_op;        // per op
  int32_t num_stages = 1;
  int32_t pipeline_ranks = 1;  // size of the pipeline mesh axis
  int32_t micro_batches = 1;   // how many run
  int32_t batch_splits = 1;    // how many the batch is cut into, which sizes each (micro_batches but in a probe)
  schedule::ScheduleTable table;
  // Per op: the node whose forward a backward block replays as one, just
  // before that node's backward (a layer of a repeat, else a top-level
  // node); -1 when the op is not recomputed.
  std::vector<int32_t> recompute_unit;
  // Per op: a dispatch's measured tokens per expert (train { expert_load });
  // empty for other ops, or for all when the models' skew prices routing.
  std::vector<std::vector<double>> expert_load;

  bool recompute(int32_t op) const { return recompute_unit[op] >= 0; }
};

// How to plan a strategy beyond what it says.
struct PlanOptions {
  // Cut the batch into this many micro-batches, whatever the strategy says
  // (verify's single-device reference of a model with batch norm).
  std::optional<int32_t> micro_batches;
  // Run only the first this many of the micro-batches, of the size the
  // strategy's count gives them (the search's memory probe: what a step
  // with fewer micro-batches holds).
  std::optional<int32_t> micro_batches_run;
};

// nullopt when the strategy cannot be resolved (diagnostics reported).
// A schedule table named by a config is read from its file.
std::optional<ResolvedStrategy> resolve_strategy(const LogicalGraph& graph, const StrategySpec& spec,
                                                 SourceManager& sources, DiagnosticEngine& diags,
                                                 const PlanOptions& options = {});

}  // namespace dstc::compiler
