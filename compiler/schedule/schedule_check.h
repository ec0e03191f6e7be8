// Checking a schedule table and running it in unit time steps: every action
// takes one step and may start once what it depends on finished in an earlier
// step (F on stage s needs F on s−1; B/I on s needs B/I on s+1 and its own F;
// W needs its I). The run gives the timestep grid shown to users.
#pragma once

#include <string>
#include <vector>

#include "compiler/schedule/schedule_table.h"
#include "ir/source/diagnostics.h"

namespace dstc::schedule {

struct ScheduleRun {
  // steps[r][i] = the step at which ranks[r][i] ran, for the actions that ran.
  std::vector<std::vector<int32_t>> steps;
  int32_t num_steps = 0;
  bool complete = false;
};

ScheduleRun run_unit_time(const ScheduleTable& table);

// The grid: one row per rank, one column per step. For an incomplete run,
// each blocked rank's next action is marked with what it waits for.
// Past this many cells (ranks x steps) the grid is replaced by one line.
inline constexpr int64_t kMaxGridCells = int64_t{1} << 20;
std::string render_grid(const ScheduleTable& table, const ScheduleRun& run);

struct ScheduleCheckOptions {
  bool forward_only = false;
  int32_t max_ongoing = 0;  // 0: no limit
  SourceRange origin;       // where the schedule was asked for (notes point here)
  // Where max_ongoing was set: a strategy's schedule config, or invalid
  // when it came from the command line (--max-ongoing).
  SourceRange max_ongoing_origin = {};
};

// Reports every problem of the table; true when it is sound and completes.
bool check_schedule(const ScheduleTable& table, const ScheduleCheckOptions& options, DiagnosticEngine& diags);

}  // namespace dstc::schedule
