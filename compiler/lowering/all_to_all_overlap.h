// `schedule { overlap_all_to_all = true }`: on each pipeline rank, a
// forward block and the backward block of another micro-batch that follows
// it run interleaved at their all-to-alls, so each one's expert dispatch
// and combine travel while the other computes. DeepSeek-V3's DualPipe pairs
// a forward and a backward chunk this way, and Megatron-Core's
// --overlap-moe-expert-parallel-comm does it within 1F1B's steady state.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/schedule/schedule_table.h"
#include "ir/module.h"

namespace dstc::compiler {

// The ops one schedule action emitted: [begin, end) of the op list.
struct ActionOps {
  uint32_t begin = 0, end = 0;
};

// Reorders `f`'s ops (before sends are placed at their receives): each
// forward action followed on its rank by a backward (or input-gradient)
// action of another micro-batch, either of them holding an all-to-all,
// moves to where the backward was emitted, and the two run in turns, each
// turn up to and including its next all-to-all. A pair is left as it was
// where moving the forward would read a value before it is written or
// send after the matching receive.
void interleave_at_all_to_alls(ir::Function& f, const schedule::ScheduleTable& table,
                               const std::vector<std::vector<ActionOps>>& action_ops);

}  // namespace dstc::compiler
