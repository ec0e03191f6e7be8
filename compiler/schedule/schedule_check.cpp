#include "compiler/schedule/schedule_check.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"

namespace dstc::schedule {
namespace {

constexpr int32_t kNotDone = INT32_MAX;

// Completion steps of the actions of every (stage, micro-batch).
struct Progress {
  int32_t micro_batches;
  std::vector<int32_t> forward, backward_input, weight;  // B counts as backward_input

  Progress(const ScheduleTable& t)
      : micro_batches(t.num_micro_batches),
        forward(size_t(t.num_stages) * t.num_micro_batches, kNotDone),
        backward_input(forward.size(), kNotDone),
        weight(forward.size(), kNotDone) {}

  size_t at(const Action& a) const { return size_t(a.stage) * micro_batches + a.micro_batch; }
  size_t at(int32_t stage, int32_t mb) const { return size_t(stage) * micro_batches + mb; }
};

bool in_range(const ScheduleTable& t, const Action& a) {
  return a.stage >= 0 && a.stage < t.num_stages && a.micro_batch >= 0 && a.micro_batch < t.num_micro_batches;
}

// The action `a` waits for that has not finished before `step`, if any.
std::optional<Action> unmet_dependency(const ScheduleTable& t, const Progress& p, const Action& a, int32_t step) {
  if (!in_range(t, a)) return a;
  switch (a.kind) {
    case ActionKind::Forward:
      if (a.stage > 0 && p.forward[p.at(a.stage - 1, a.micro_batch)] >= step)
        return Action{a.stage - 1, ActionKind::Forward, a.micro_batch, {}};
      return std::nullopt;
    case ActionKind::Backward:
    case ActionKind::InputGrad:
      if (p.forward[p.at(a)] >= step) return Action{a.stage, ActionKind::Forward, a.micro_batch, {}};
      if (a.stage + 1 < t.num_stages && p.backward_input[p.at(a.stage + 1, a.micro_batch)] >= step)
        return Action{a.stage + 1, ActionKind::InputGrad, a.micro_batch, {}};
      return std::nullopt;
    case ActionKind::WeightGrad:
      if (p.backward_input[p.at(a)] >= step) return Action{a.stage, ActionKind::InputGrad, a.micro_batch, {}};
      return std::nullopt;
  }
  return std::nullopt;
}

void mark_done(const Action& a, Progress& p, int32_t step) {
  switch (a.kind) {
    case ActionKind::Forward: p.forward[p.at(a)] = step; break;
    case ActionKind::Backward:
    case ActionKind::InputGrad: p.backward_input[p.at(a)] = step; break;
    case ActionKind::WeightGrad: p.weight[p.at(a)] = step; break;
  }
}

// Replays a run to find the state it stopped in.
Progress progress_of(const ScheduleTable& table, const ScheduleRun& run) {
  Progress p(table);
  for (size_t r = 0; r < table.ranks.size(); ++r) {
    for (size_t i = 0; i < run.steps[r].size(); ++i) mark_done(table.ranks[r][i], p, run.steps[r][i]);
  }
  return p;
}

// A dependency as the table spells it: the backward a stage waits for may be
// listed as a full backward (B) or an input-grad (I).
Action as_listed(const ScheduleTable& table, Action wanted) {
  if (wanted.kind != ActionKind::InputGrad) return wanted;
  for (const Action& a : table.ranks[table.rank_of_stage(wanted.stage)]) {
    if (a.stage == wanted.stage && a.micro_batch == wanted.micro_batch && a.kind == ActionKind::Backward) return a;
  }
  return wanted;
}

std::string trimmed_grid(const ScheduleTable& table, const ScheduleRun& run) {
  std::string grid = render_grid(table, run);
  if (!grid.empty() && grid.back() == '\n') grid.pop_back();
  return grid;
}

// An action on a rank that does not hold its stage. A table read from a
// CSV file placed the stage by the first row to list it: the note points
// there.
void report_wrong_rank(const ScheduleTable& table, const Action& a, int32_t rank, SourceRange where,
                       DiagnosticEngine& diags) {
  const int32_t placed = table.rank_of_stage(a.stage);
  auto error = diags.error(
      diag::kScheduleWrongRank, where,
      fmt::format("action {} runs on rank {}, but stage {} runs on rank {}", to_string(a), rank, a.stage, placed));
  if (table.stage_ranks.empty()) {
    error.note(fmt::format("stage s runs on rank s mod {} (the number of pipeline ranks)", table.num_ranks));
    return;
  }
  const auto& row = table.ranks[placed];
  auto first = std::find_if(row.begin(), row.end(), [&](const Action& b) { return b.stage == a.stage; });
  if (first != row.end() && first->where.valid())
    error.note(first->where, fmt::format("the first row to list stage {} is rank {}'s, which places the stage there",
                                         a.stage, placed));
  else
    error.note(fmt::format("this schedule places stage {} on rank {}", a.stage, placed));
}

}  // namespace

ScheduleRun run_unit_time(const ScheduleTable& table) {
  ScheduleRun run;
  const auto ranks = static_cast<int32_t>(table.ranks.size());
  run.steps.resize(table.ranks.size());
  Progress progress(table);
  size_t unfinished = 0;
  std::vector<int32_t> candidates;
  for (int32_t r = 0; r < ranks; ++r) {
    if (!table.ranks[r].empty()) ++unfinished, candidates.push_back(r);
  }
  // Only a rank that ran, or one waiting on an action that just finished,
  // can run at the next step: each step costs what it runs, so a chain of
  // n ranks takes O(n) steps of O(1), not O(n^2).
  std::vector<int32_t> woken;
  std::vector<char> is_woken(table.ranks.size(), 0);
  auto wake = [&](int32_t stage) {
    if (stage < 0 || stage >= table.num_stages) return;
    int32_t r = table.rank_of_stage(stage);
    if (r < ranks && !is_woken[r]) is_woken[r] = 1, woken.push_back(r);
  };
  for (int32_t step = 0;; ++step) {
    if (unfinished == 0) {
      run.complete = true;
      run.num_steps = step;
      return run;
    }
    bool progressed = false;
    for (int32_t r : candidates) {
      size_t next = run.steps[r].size();
      if (next == table.ranks[r].size()) continue;
      const Action& a = table.ranks[r][next];
      if (unmet_dependency(table, progress, a, step)) continue;
      mark_done(a, progress, step);
      run.steps[r].push_back(step);
      progressed = true;
      if (next + 1 == table.ranks[r].size()) --unfinished;
      if (!is_woken[r]) is_woken[r] = 1, woken.push_back(r);
      // The dependents of `a`: the next stage's forward, this stage's
      // backward and weight-grad, the previous stage's backward.
      wake(a.stage + 1);
      wake(a.stage);
      wake(a.stage - 1);
    }
    if (!progressed) {  // stuck: every unfinished rank waits
      run.num_steps = step;
      return run;
    }
    std::sort(woken.begin(), woken.end());
    for (int32_t r : woken) is_woken[r] = 0;
    candidates.swap(woken);
    woken.clear();
  }
}

std::string render_grid(const ScheduleTable& table, const ScheduleRun& run) {
  std::string out;
  if (int64_t{run.num_steps} * static_cast<int64_t>(table.ranks.size()) > kMaxGridCells) {
    out = fmt::format("({} ranks x {} steps: too large to draw; --csv prints the table)\n", table.ranks.size(),
                      run.num_steps);
  } else {
    size_t width = 4;
    for (const auto& rank : table.ranks)
      for (const Action& a : rank) width = std::max(width, to_string(a).size() + 1);
    out = fmt::format("{:<8}", "step");
    for (int32_t s = 0; s < run.num_steps; ++s) out += fmt::format("{:<{}}", s, width);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
    for (size_t r = 0; r < table.ranks.size(); ++r) {
      std::vector<std::string> cells(run.num_steps, ".");
      for (size_t i = 0; i < run.steps[r].size(); ++i) cells[run.steps[r][i]] = to_string(table.ranks[r][i]);
      std::string row = fmt::format("{:<8}", fmt::format("rank {}", r));
      for (const std::string& c : cells) row += fmt::format("{:<{}}", c, width);
      while (!row.empty() && row.back() == ' ') row.pop_back();
      out += row + "\n";
    }
  }
  if (!run.complete) {
    Progress progress = progress_of(table, run);
    constexpr size_t kShownBlocked = 16;
    size_t blocked = 0;
    for (size_t r = 0; r < table.ranks.size(); ++r) {
      size_t next = run.steps[r].size();
      if (next == table.ranks[r].size()) continue;
      if (++blocked > kShownBlocked) continue;
      const Action& a = table.ranks[r][next];
      std::optional<Action> waits = unmet_dependency(table, progress, a, run.num_steps);
      out += fmt::format("rank {} is blocked at {} (action {} of its list)", r, to_string(a), next + 1);
      if (waits && !(*waits == a)) {
        out += fmt::format(", waiting for {} on rank {}", to_string(as_listed(table, *waits)),
                           table.rank_of_stage(waits->stage));
      }
      out += "\n";
    }
    if (blocked > kShownBlocked) out += fmt::format("and {} more ranks are blocked\n", blocked - kShownBlocked);
  }
  return out;
}

bool check_schedule(const ScheduleTable& table, const ScheduleCheckOptions& options, DiagnosticEngine& diags) {
  size_t errors_before = diags.error_count();
  auto where = [&](const Action& a) { return a.where.valid() ? a.where : options.origin; };
  const int32_t S = table.num_stages, M = table.num_micro_batches;

  // Where each action first appears: (rank, index), for duplicates and order.
  struct Seen {
    int32_t rank = -1;
    int32_t index = -1;
    const Action* action = nullptr;
  };
  std::vector<Seen> seen[4];
  for (auto& s : seen) s.resize(size_t(S) * M);
  auto slot = [&](const Action& a) -> Seen& {
    return seen[static_cast<int>(a.kind)][size_t(a.stage) * M + a.micro_batch];
  };

  for (int32_t r = 0; r < static_cast<int32_t>(table.ranks.size()); ++r) {
    int32_t in_flight = 0;
    bool reported_ongoing = false;
    for (int32_t i = 0; i < static_cast<int32_t>(table.ranks[r].size()); ++i) {
      const Action& a = table.ranks[r][i];
      if (!in_range(table, a)) {
        diags.error(diag::kScheduleOutOfRange, where(a),
                    fmt::format("action {} is outside the pipeline: it has stages 0..{} and micro-batches 0..{}",
                                to_string(a), S - 1, M - 1));
        continue;
      }
      if (table.rank_of_stage(a.stage) != r) report_wrong_rank(table, a, r, where(a), diags);
      if (options.forward_only && a.kind != ActionKind::Forward) {
        diags.error(diag::kScheduleUnexpectedAction, where(a),
                    fmt::format("action {} is a backward, but this schedule runs forwards only", to_string(a)));
        continue;
      }
      Seen& s = slot(a);
      if (s.action) {
        diags.error(diag::kScheduleDuplicateAction, where(a), fmt::format("action {} appears twice", to_string(a)))
            .note(where(*s.action), fmt::format("first on rank {}", s.rank));
        continue;
      }
      s = {r, i, &a};
      if (a.kind == ActionKind::Forward) ++in_flight;
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::InputGrad) --in_flight;
      if (options.max_ongoing > 0 && in_flight > options.max_ongoing && !reported_ongoing) {
        reported_ongoing = true;
        auto error = diags.error(diag::kScheduleMaxOngoing, where(a),
                                 fmt::format("rank {} has {} forwards in flight at {}, more than max_ongoing = {}", r,
                                             in_flight, to_string(a), options.max_ongoing));
        if (options.max_ongoing_origin.valid())
          error.note(options.max_ongoing_origin, "max_ongoing set here");
        else
          error.note("max_ongoing set by --max-ongoing");
      }
    }
  }

  // Missing actions, mixed B and I/W, and order within a rank.
  std::vector<std::string> missing;
  for (int32_t st = 0; st < S; ++st) {
    for (int32_t mb = 0; mb < M; ++mb) {
      size_t k = size_t(st) * M + mb;
      const Seen& f = seen[0][k];
      const Seen& b = seen[1][k];
      const Seen& in = seen[2][k];
      const Seen& w = seen[3][k];
      if (!f.action) missing.push_back(fmt::format("{}F{}", st, mb));
      if (options.forward_only) continue;
      if (b.action && (in.action || w.action)) {
        const Action& other = in.action ? *in.action : *w.action;
        diags
            .error(diag::kScheduleUnexpectedAction, where(other),
                   fmt::format("stage {} micro-batch {} has a full backward ({}) and also {}", st, mb,
                               to_string(*b.action), to_string(other)))
            .note(where(*b.action), "full backward here");
        continue;
      }
      if (!b.action && !in.action) missing.push_back(fmt::format("{}B{} (or {}I{} and {}W{})", st, mb, st, mb, st, mb));
      if (in.action && !w.action) missing.push_back(fmt::format("{}W{}", st, mb));
      if (w.action && !in.action) missing.push_back(fmt::format("{}I{}", st, mb));
      const Seen& back = b.action ? b : in;
      if (f.action && back.action && back.rank == f.rank && back.index < f.index) {
        diags
            .error(diag::kScheduleOrder, where(*back.action),
                   fmt::format("rank {} runs {} before its forward {}", back.rank, to_string(*back.action),
                               to_string(*f.action)))
            .note(where(*f.action), "forward here");
      }
      if (in.action && w.action && w.rank == in.rank && w.index < in.index) {
        diags
            .error(diag::kScheduleOrder, where(*w.action),
                   fmt::format("rank {} runs {} before {}", w.rank, to_string(*w.action), to_string(*in.action)))
            .note(where(*in.action), "input-grad here");
      }
    }
  }
  if (!missing.empty()) {
    constexpr size_t kShown = 8;
    std::string list;
    for (size_t i = 0; i < std::min(kShown, missing.size()); ++i) list += (i ? ", " : "") + missing[i];
    if (missing.size() > kShown) list += fmt::format(" and {} more", missing.size() - kShown);
    diags.error(
        diag::kScheduleMissingAction, options.origin,
        fmt::format("the schedule lacks {} action{}: {}", missing.size(), missing.size() == 1 ? "" : "s", list));
  }

  if (diags.error_count() != errors_before) return false;
  ScheduleRun run = run_unit_time(table);
  if (!run.complete) {
    // Located at the first blocked rank's next action, with the action it
    // waits for: in a table, the cells of the cycle.
    const Action* stuck = nullptr;
    for (size_t r = 0; r < table.ranks.size() && !stuck; ++r) {
      if (run.steps[r].size() < table.ranks[r].size()) stuck = &table.ranks[r][run.steps[r].size()];
    }
    auto error =
        diags.error(diag::kScheduleDeadlock, stuck ? where(*stuck) : options.origin,
                    fmt::format("the pipeline schedule deadlocks after step {}: no rank can run its next action",
                                run.num_steps - 1));
    if (stuck) {
      Progress progress = progress_of(table, run);
      if (std::optional<Action> waits = unmet_dependency(table, progress, *stuck, run.num_steps)) {
        Action listed = as_listed(table, *waits);
        const Action* cell = nullptr;
        for (const Action& a : table.ranks[table.rank_of_stage(listed.stage)]) {
          if (a == listed) cell = &a;
        }
        error.note(cell ? where(*cell) : SourceRange{},
                   fmt::format("{} waits for {} on rank {}, which cannot run either", to_string(*stuck),
                               to_string(listed), table.rank_of_stage(listed.stage)));
      }
    }
    error.note("timestep grid, one action per step:\n" + trimmed_grid(table, run));
    return false;
  }
  return true;
}

}  // namespace dstc::schedule
