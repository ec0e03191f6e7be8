// A pipeline schedule as a table: for each pipeline rank, the ordered list of
// actions it runs. Actions are named as in PyTorch's
// torch.distributed.pipelining CSV schedules: `2F0` is stage 2, forward,
// micro-batch 0; I is input-grad, W weight-grad, B both (a full backward).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/source/source_manager.h"

namespace dstc::schedule {

enum class ActionKind : uint8_t { Forward, Backward, InputGrad, WeightGrad };

struct Action {
  int32_t stage = 0;
  ActionKind kind = ActionKind::Forward;
  int32_t micro_batch = 0;
  SourceRange where;  // the CSV cell it came from, when read from a file
  // A forward the schedule overlaps with the backward that follows it
  // (DualPipeV's forward-backward pairs; see ScheduleTable::names_pairs).
  bool pairs_with_next = false;

  friend bool operator==(const Action& a, const Action& b) {
    return a.stage == b.stage && a.kind == b.kind && a.micro_batch == b.micro_batch;
  }
};

char action_letter(ActionKind kind);
std::string to_string(const Action& a);
// Parses "2F0", "0I3", "1W12", "3B0"; nullopt for anything else.
std::optional<Action> parse_action(std::string_view text);

struct ScheduleTable {
  int32_t num_ranks = 0;
  int32_t num_stages = 0;  // ranks × virtual stages per rank
  int32_t num_micro_batches = 0;
  std::vector<std::vector<Action>> ranks;  // ranks[r] = rank r's actions in order

  // The rank each stage runs on; empty for the built-in round-robin
  // schedules ("looping": stage s on rank s % num_ranks, the 1F1B and
  // interleaved placement). V-shaped for ZB-V and DualPipeV (rank r holds
  // stages r and 2·num_ranks − 1 − r, so the first and last stage share
  // rank 0). A CSV table always fills it, with each stage wherever its rows
  // run it, round-robin or not (round_robin() tells).
  std::vector<int32_t> stage_ranks;
  // The schedule names the forward-backward pairs `overlap_all_to_all`
  // interleaves (Action::pairs_with_next); otherwise every forward a
  // backward of another micro-batch follows is one.
  bool names_pairs = false;
  int32_t rank_of_stage(int32_t stage) const {
    return stage_ranks.empty() ? stage % num_ranks : stage_ranks[static_cast<size_t>(stage)];
  }
  bool round_robin() const;
  int32_t virtual_stages() const { return num_ranks ? num_stages / num_ranks : 0; }
  int32_t stages_on(int32_t rank) const;
};

}  // namespace dstc::schedule
