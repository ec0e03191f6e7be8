// Built-in pipeline schedules: GPipe (fill-drain), 1F1B, interleaved 1F1B
// with v virtual stages per rank (Megatron-LM), ZB-H1, ZB-2P and ZB-V (zero
// bubble, Qi et al. 2023) and DualPipeV (DeepSeek's DualPipe cut in half),
// each as a ScheduleTable.
#pragma once

#include <string>
#include <variant>

#include "compiler/schedule/schedule_table.h"

namespace dstc::schedule {

enum class ScheduleKind { GPipe, OneFOneB, Interleaved, ZeroBubbleH1, ZeroBubble2P, ZeroBubbleV, DualPipeV };

// ZB-V's and DualPipeV's V: each rank holds a stage going down and one
// coming back.
inline constexpr int32_t kZeroBubbleVStagesPerRank = 2;
inline bool v_shaped(ScheduleKind kind) { return kind == ScheduleKind::ZeroBubbleV || kind == ScheduleKind::DualPipeV; }

std::string_view schedule_kind_name(ScheduleKind kind);

// The most actions (forwards and backwards of a stage and micro-batch) a
// schedule may hold: 128 pipeline ranks of 1024 micro-batches with 64
// virtual stages each, and a table of it stays in the hundreds of megabytes.
inline constexpr int64_t kMaxScheduleActions = int64_t{1} << 24;

struct ScheduleRequest {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int32_t ranks = 1;
  int32_t virtual_stages = 1;  // interleaved; kZeroBubbleVStagesPerRank for zb_v and dualpipe_v
  int32_t micro_batches = 1;
  // Forward micro-batches a rank may have in flight before their backward
  // (Proteus's max_ongoing_micro_batch); 0 means the schedule's own limit.
  // The interleaved schedule keeps Megatron-LM's warm-up and ignores it.
  int32_t max_ongoing = 0;
  bool forward_only = false;  // inference: forwards only
  // Forwards 1F1B and the interleaved schedule run ahead of their warm-up:
  // Megatron-Core adds one when it overlaps the all-to-alls, so that the
  // forward paired with each backward is not one the next stage waits for.
  int32_t extra_warmup = 0;
};

// The table, or why the request cannot be scheduled (a message for a
// diagnostic, e.g. interleaving with micro-batches not a multiple of ranks).
std::variant<ScheduleTable, std::string> generate_schedule(const ScheduleRequest& request);

}  // namespace dstc::schedule
