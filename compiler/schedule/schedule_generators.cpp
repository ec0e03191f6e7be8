#include "compiler/schedule/schedule_generators.h"

#include <algorithm>
#include <deque>

#include <fmt/format.h>

namespace dstc::schedule {
namespace {

Action forward(int32_t stage, int32_t mb) { return {stage, ActionKind::Forward, mb, {}}; }
Action backward(int32_t stage, int32_t mb) { return {stage, ActionKind::Backward, mb, {}}; }

// Caps a warm-up count so that at most max_ongoing forwards are in flight:
// the first steady-state forward adds one more.
int32_t cap_warmup(int32_t warmup, const ScheduleRequest& req) {
  return req.max_ongoing > 0 ? std::min(warmup, req.max_ongoing - 1) : warmup;
}

std::vector<Action> gpipe(int32_t rank, const ScheduleRequest& req) {
  // Fill-drain in groups of max_ongoing micro-batches (all of them by default).
  int32_t group = req.max_ongoing > 0 ? req.max_ongoing : req.micro_batches;
  std::vector<Action> actions;
  for (int32_t first = 0; first < req.micro_batches; first += group) {
    int32_t last = std::min(req.micro_batches, first + group);
    for (int32_t mb = first; mb < last; ++mb) actions.push_back(forward(rank, mb));
    for (int32_t mb = first; mb < last; ++mb) actions.push_back(backward(rank, mb));
  }
  return actions;
}

std::vector<Action> one_f_one_b(int32_t rank, const ScheduleRequest& req) {
  int32_t m = req.micro_batches;
  int32_t warmup = cap_warmup(std::min(req.ranks - rank - 1, m), req);
  std::vector<Action> actions;
  for (int32_t mb = 0; mb < warmup; ++mb) actions.push_back(forward(rank, mb));
  for (int32_t i = 0; i < m - warmup; ++i) {
    actions.push_back(forward(rank, warmup + i));
    actions.push_back(backward(rank, i));
  }
  for (int32_t mb = m - warmup; mb < m; ++mb) actions.push_back(backward(rank, mb));
  return actions;
}

// Megatron-LM's interleaved schedule: chunk k of the m·v forward chunks is
// model chunk (k / p) % v of micro-batch (k / (p·v))·p + k % p; backward
// chunks visit the model chunks in reverse.
std::vector<Action> interleaved(int32_t rank, const ScheduleRequest& req) {
  int32_t p = req.ranks, v = req.virtual_stages, total = req.micro_batches * v;
  auto micro_batch = [&](int32_t k) { return (k / (p * v)) * p + k % p; };
  auto fwd = [&](int32_t k) { return forward(((k / p) % v) * p + rank, micro_batch(k)); };
  auto bwd = [&](int32_t k) { return backward((v - 1 - (k / p) % v) * p + rank, micro_batch(k)); };
  int32_t warmup = std::min(2 * (p - rank - 1) + (v - 1) * p, total);
  std::vector<Action> actions;
  for (int32_t k = 0; k < warmup; ++k) actions.push_back(fwd(k));
  for (int32_t i = 0; i < total - warmup; ++i) {
    actions.push_back(fwd(warmup + i));
    actions.push_back(bwd(i));
  }
  for (int32_t k = total - warmup; k < total; ++k) actions.push_back(bwd(k));
  return actions;
}

// ZB-H1: 1F1B with the backward split into input-grad (I) and weight-grad
// (W). Rank r keeps up to its warm-up count (p − r − 1) of W passes pending
// through the steady state and runs one after each cool-down I, where 1F1B
// would sit idle waiting for the next rank's gradient; the rest drain last.
std::vector<Action> zero_bubble_h1(int32_t rank, const ScheduleRequest& req) {
  int32_t m = req.micro_batches;
  int32_t warmup = cap_warmup(std::min(req.ranks - rank - 1, m), req);
  std::vector<Action> actions;
  std::deque<int32_t> pending_w;
  auto input_grad = [&](int32_t mb) {
    actions.push_back({rank, ActionKind::InputGrad, mb, {}});
    pending_w.push_back(mb);
  };
  auto weight_grad = [&] {
    actions.push_back({rank, ActionKind::WeightGrad, pending_w.front(), {}});
    pending_w.pop_front();
  };
  for (int32_t mb = 0; mb < warmup; ++mb) actions.push_back(forward(rank, mb));
  for (int32_t i = 0; i < m - warmup; ++i) {
    actions.push_back(forward(rank, warmup + i));
    input_grad(i);
    if (static_cast<int32_t>(pending_w.size()) > warmup) weight_grad();
  }
  for (int32_t mb = m - warmup; mb < m; ++mb) {
    input_grad(mb);
    weight_grad();
  }
  while (!pending_w.empty()) weight_grad();
  return actions;
}

}  // namespace

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved: return "interleaved";
    case ScheduleKind::ZeroBubbleH1: return "zb_h1";
  }
  return "?";
}

std::variant<ScheduleTable, std::string> generate_schedule(const ScheduleRequest& req) {
  if (req.ranks < 1) return std::string("a pipeline needs at least one rank");
  if (req.micro_batches < 1) return std::string("a pipeline needs at least one micro-batch");
  if (req.max_ongoing < 0) return std::string("max_ongoing must be positive");
  bool interleaving = req.kind == ScheduleKind::Interleaved;
  if (!interleaving && req.virtual_stages != 1) {
    return fmt::format("virtual stages are only meaningful for the interleaved schedule, not {}",
                       schedule_kind_name(req.kind));
  }
  if (interleaving && req.virtual_stages < 1) return std::string("interleaving needs at least one virtual stage");
  // Counted in 64 bits: ranks, stages and micro-batches are each 32-bit.
  int64_t actions = int64_t{req.ranks} * req.virtual_stages * req.micro_batches * (req.forward_only ? 1 : 2);
  if (actions > kMaxScheduleActions) {
    return fmt::format("{} ranks x {} virtual stages x {} micro-batches is {} actions, more than the {} dstc schedules",
                       req.ranks, req.virtual_stages, req.micro_batches, actions, kMaxScheduleActions);
  }
  if (interleaving && req.micro_batches % req.ranks != 0) {
    return fmt::format("the interleaved schedule needs micro-batches ({}) to be a multiple of the pipeline ranks ({})",
                       req.micro_batches, req.ranks);
  }

  ScheduleTable table;
  table.num_ranks = req.ranks;
  table.num_stages = req.ranks * req.virtual_stages;
  table.num_micro_batches = req.micro_batches;
  table.ranks.resize(req.ranks);
  for (int32_t r = 0; r < req.ranks; ++r) {
    if (req.forward_only) {
      // Inference: every rank runs its stages' forwards in micro-batch order,
      // chunk by chunk as the interleaved schedule orders them.
      ScheduleRequest fwd = req;
      for (const Action& a : interleaved(r, fwd)) {
        if (a.kind == ActionKind::Forward) table.ranks[r].push_back(a);
      }
      continue;
    }
    switch (req.kind) {
      case ScheduleKind::GPipe: table.ranks[r] = gpipe(r, req); break;
      case ScheduleKind::OneFOneB: table.ranks[r] = one_f_one_b(r, req); break;
      case ScheduleKind::Interleaved: table.ranks[r] = interleaved(r, req); break;
      case ScheduleKind::ZeroBubbleH1: table.ranks[r] = zero_bubble_h1(r, req); break;
    }
  }
  return table;
}

}  // namespace dstc::schedule
