#include "compiler/schedule/schedule_generators.h"

#include <algorithm>
#include <array>
#include <deque>
#include <limits>

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
  int32_t warmup = cap_warmup(std::min(req.ranks - rank - 1 + req.extra_warmup, m), req);
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
  int32_t warmup = std::min(2 * (p - rank - 1) + (v - 1) * p + req.extra_warmup, total);
  std::vector<Action> actions;
  for (int32_t k = 0; k < warmup; ++k) actions.push_back(fwd(k));
  for (int32_t i = 0; i < total - warmup; ++i) {
    actions.push_back(fwd(warmup + i));
    actions.push_back(bwd(i));
  }
  for (int32_t k = total - warmup; k < total; ++k) actions.push_back(bwd(k));
  return actions;
}

// The zero-bubble schedules' list scheduler: each backward split into
// input-grad (I) and weight-grad (W) passes, every pass one step (the
// papers' T_F = T_B = T_W). Each step a rank runs the first ready of: an I
// (the critical path back to the first stage), an F (unless
// `forward_limit(stage)` micro-batches of that stage are already between F
// and W), a W; among its stages, the one whose next pass has the earliest
// micro-batch, ties to the first of `stages_of(rank)`. So W passes fill the
// waits and only the last micro-batches' Ws trail the last I.
template <typename StagesOf, typename ForwardLimit>
std::vector<std::vector<Action>> list_schedule(const ScheduleRequest& req, int32_t stages, StagesOf stages_of,
                                               ForwardLimit forward_limit) {
  const int32_t p = req.ranks, m = req.micro_batches;
  constexpr int64_t kNotYet = -1;
  // done[kind][stage][mb]: the step a pass ran in (F, I, W), kNotYet before.
  std::array<std::vector<std::vector<int64_t>>, 3> done;
  for (auto& kind : done) kind.assign(stages, std::vector<int64_t>(m, kNotYet));
  auto finished = [&](int kind, int32_t stage, int32_t mb, int64_t step) {
    return done[kind][stage][mb] != kNotYet && done[kind][stage][mb] < step;
  };
  // Per stage: the next micro-batch of each pass (each runs in order).
  std::array<std::vector<int32_t>, 3> next;
  for (auto& n : next) n.assign(stages, 0);
  std::vector<std::vector<Action>> rows(p);
  const int passes = req.forward_only ? 1 : 3;
  int64_t remaining = int64_t{passes} * stages * m;
  for (int64_t step = 0; remaining > 0; ++step) {
    for (int32_t r = 0; r < p; ++r) {
      auto ready_i = [&](int32_t s) {
        int32_t mb = next[1][s];
        return mb < m && finished(0, s, mb, step) && (s == stages - 1 || finished(1, s + 1, mb, step));
      };
      auto ready_f = [&](int32_t s) {
        int32_t mb = next[0][s];
        if (mb >= m || (s > 0 && !finished(0, s - 1, mb, step))) return false;
        return req.forward_only || next[0][s] - next[2][s] < forward_limit(s);
      };
      auto ready_w = [&](int32_t s) { return next[2][s] < m && finished(1, s, next[2][s], step); };
      auto pick = [&](auto ready, int kind) {
        int32_t best = -1;
        for (int32_t s : stages_of(r))
          if (ready(s) && (best < 0 || next[kind][s] < next[kind][best])) best = s;
        return best;
      };
      int kind = 1;
      int32_t s = req.forward_only ? -1 : pick(ready_i, 1);
      if (s < 0) s = pick(ready_f, kind = 0);
      if (s < 0 && !req.forward_only) s = pick(ready_w, kind = 2);
      if (s < 0) continue;
      int32_t mb = next[kind][s]++;
      done[kind][s][mb] = step;
      constexpr std::array<ActionKind, 3> kKinds = {ActionKind::Forward, ActionKind::InputGrad, ActionKind::WeightGrad};
      rows[r].push_back({s, kKinds[kind], mb, {}});
      --remaining;
    }
  }
  return rows;
}

// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): one
// stage per rank; rank r starts forwards while fewer than p − r micro-batches
// are in flight (F run, W not yet: 1F1B's peak activations).
std::vector<std::vector<Action>> zero_bubble_h1(const ScheduleRequest& req) {
  const int32_t p = req.ranks;
  return list_schedule(
      req, p, [](int32_t r) { return std::array<int32_t, 1>{r}; },
      [&](int32_t stage) { return req.max_ongoing > 0 ? std::min(p - stage, req.max_ongoing) : p - stage; });
}

// ZB-2P (the same paper's automatic schedule under a memory limit of 2p
// micro-batches' activations on every rank): the list scheduler with each
// rank starting forwards while fewer than 2p micro-batches are between F and
// W, twice what 1F1B's first rank holds. The warm-up's extra forwards fill
// the bubble before the first backward arrives, the W passes the one after.
std::vector<std::vector<Action>> zero_bubble_2p(const ScheduleRequest& req) {
  const int32_t limit = req.max_ongoing > 0 ? std::min(req.max_ongoing, 2 * req.ranks) : 2 * req.ranks;
  return list_schedule(
      req, req.ranks, [](int32_t r) { return std::array<int32_t, 1>{r}; }, [&](int32_t) { return limit; });
}

// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", and the
// zero-bubble paper's ZB-V): kZeroBubbleVStagesPerRank·p stages in a V, rank
// r holding stage r (chunk 0, going down) and stage 2p − 1 − r (chunk 1,
// coming back), the later stage first among equals. Chunk 0 starts forwards
// while fewer than p (or max_ongoing) of its micro-batches are between F and
// W, so a rank holds about 2p half-size chunks, 1F1B's p stages' worth;
// chunk 1's forward is never held back: its backward is what retires chunk
// 0's.
// ZB-V's and DualPipeV's V: rank r holds stage r going down and stage
// 2·ranks − 1 − r coming back.
std::vector<int32_t> v_placement(int32_t ranks) {
  std::vector<int32_t> stage_ranks(2 * static_cast<size_t>(ranks));
  for (int32_t r = 0; r < ranks; ++r) stage_ranks[r] = stage_ranks[2 * ranks - 1 - r] = r;
  return stage_ranks;
}

std::vector<std::vector<Action>> zero_bubble_v(const ScheduleRequest& req) {
  const int32_t p = req.ranks, stages = kZeroBubbleVStagesPerRank * p;
  const int32_t limit = req.max_ongoing > 0 ? req.max_ongoing : p;
  return list_schedule(
      req, stages,
      [&](int32_t r) {
        return std::array<int32_t, 2>{stages - 1 - r, r};
      },
      [&](int32_t stage) { return stage >= p ? std::numeric_limits<int32_t>::max() : limit; });
}

// DualPipeV (deepseek-ai/DualPipe, dualpipe/dualpipev.py: DualPipe cut in
// half, by Sea AI Lab): rank r holds chunk 0 = stage r and chunk 1 = stage
// 2p − 1 − r, and runs its eight phases. A "forward-backward" pair is the
// forward of one chunk followed by the backward of the other, which the
// runtime overlaps (here `overlap_all_to_all`, which pairs only these); a
// backward "with zero bubble" is its input-grad, its weight-grad deferred
// to a later W in first-in first-out order. Needs at least 2p micro-batches.
std::vector<Action> dualpipe_v(int32_t rank, const ScheduleRequest& req) {
  const int32_t p = req.ranks, m = req.micro_batches;
  const std::array<int32_t, 2> stage = {rank, 2 * p - 1 - rank};
  std::array<int32_t, 2> next_forward{}, next_backward{};
  std::deque<Action> deferred;  // weight-grads of zero-bubble backwards
  std::vector<Action> actions;
  auto f = [&](int phase) { actions.push_back(forward(stage[phase], next_forward[phase]++)); };
  auto b = [&](int phase, bool zero_bubble = false) {
    int32_t mb = next_backward[phase]++;
    if (!zero_bubble) {
      actions.push_back(backward(stage[phase], mb));
      return;
    }
    actions.push_back({stage[phase], ActionKind::InputGrad, mb, {}});
    deferred.push_back({stage[phase], ActionKind::WeightGrad, mb, {}});
  };
  auto w = [&] {
    actions.push_back(deferred.front());
    deferred.pop_front();
  };
  auto fb = [&](int forward_phase, int backward_phase, bool overlapped = true) {
    f(forward_phase);
    actions.back().pairs_with_next = overlapped;
    b(backward_phase);
  };
  for (int32_t i = 0; i < 2 * (p - rank - 1); ++i) f(0);             // 1: nF0
  for (int32_t i = 0; i < rank + 1; ++i) f(0), f(1);                 // 2: nF0F1
  for (int32_t i = 0; i < p - rank - 1; ++i) b(1, true), w(), f(1);  // 3: nB1W1F1
  // 4: nF0B1F1B0; the last rank runs its first pair apart, as DualPipeV
  // does to shorten the bubble.
  for (int32_t i = 0; i < m - 2 * p + rank + 1; ++i) fb(0, 1, i > 0 || rank < p - 1), fb(1, 0);
  for (int32_t i = 0; i < p - rank - 1; ++i) b(1), fb(1, 0);  // 5: nB1F1B0
  // 6: nB1B0, the second half with zero bubble (from the middle, chunk 1's
  // backward first on odd ranks and chunk 0's on even ones).
  const int32_t step_6 = rank + 1;
  bool zero_bubble = false;
  for (int32_t i = 0; i < step_6; ++i) {
    if (i == step_6 / 2 && rank % 2 == 1) zero_bubble = true;
    b(1, zero_bubble);
    if (i == step_6 / 2 && rank % 2 == 0) zero_bubble = true;
    b(0, zero_bubble);
  }
  for (int32_t i = 0; i < p - rank - 1; ++i) w(), b(0, true);  // 7: nWB0
  while (!deferred.empty()) w();                               // 8: nW
  return actions;
}

}  // namespace

std::string_view schedule_kind_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::GPipe: return "gpipe";
    case ScheduleKind::OneFOneB: return "1f1b";
    case ScheduleKind::Interleaved: return "interleaved";
    case ScheduleKind::ZeroBubbleH1: return "zb_h1";
    case ScheduleKind::ZeroBubble2P: return "zb_2p";
    case ScheduleKind::ZeroBubbleV: return "zb_v";
    case ScheduleKind::DualPipeV: return "dualpipe_v";
  }
  return "?";
}

std::variant<ScheduleTable, std::string> generate_schedule(const ScheduleRequest& req) {
  if (req.ranks < 1) return std::string("a pipeline needs at least one rank");
  if (req.micro_batches < 1) return std::string("a pipeline needs at least one micro-batch");
  if (req.max_ongoing < 0) return std::string("max_ongoing must be positive");
  bool interleaving = req.kind == ScheduleKind::Interleaved;
  if (v_shaped(req.kind) && req.virtual_stages != kZeroBubbleVStagesPerRank) {
    return fmt::format("{} places {} stages on each rank, not {}", schedule_kind_name(req.kind),
                       kZeroBubbleVStagesPerRank, req.virtual_stages);
  }
  if (!interleaving && !v_shaped(req.kind) && req.virtual_stages != 1) {
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

  if (req.kind == ScheduleKind::DualPipeV && req.max_ongoing > 0 && !req.forward_only)
    return std::string("dualpipe_v runs DualPipeV's own warm-up, which max_ongoing cannot bound");
  if (req.kind == ScheduleKind::DualPipeV && !req.forward_only && req.micro_batches < 2 * req.ranks) {
    return fmt::format("dualpipe_v needs at least 2p = {} micro-batches for {} pipeline ranks, not {}", 2 * req.ranks,
                       req.ranks, req.micro_batches);
  }

  ScheduleTable table;
  table.num_ranks = req.ranks;
  table.num_stages = req.ranks * req.virtual_stages;
  table.num_micro_batches = req.micro_batches;
  table.ranks.resize(req.ranks);
  if (req.kind == ScheduleKind::ZeroBubbleV || (req.kind == ScheduleKind::DualPipeV && req.forward_only)) {
    // DualPipeV's inference runs ZB-V's forwards: both place the same V.
    table.stage_ranks = v_placement(req.ranks);
    table.ranks = zero_bubble_v(req);
    return table;
  }
  if (req.kind == ScheduleKind::DualPipeV) {
    table.stage_ranks = v_placement(req.ranks);
    table.names_pairs = true;
    for (int32_t r = 0; r < req.ranks; ++r) table.ranks[r] = dualpipe_v(r, req);
    return table;
  }
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
      case ScheduleKind::ZeroBubbleH1:
      case ScheduleKind::ZeroBubble2P:
      case ScheduleKind::ZeroBubbleV:
      case ScheduleKind::DualPipeV: break;  // the whole table at once
    }
  }
  if (req.kind == ScheduleKind::ZeroBubbleH1 && !req.forward_only) table.ranks = zero_bubble_h1(req);
  if (req.kind == ScheduleKind::ZeroBubble2P && !req.forward_only) table.ranks = zero_bubble_2p(req);
  return table;
}

}  // namespace dstc::schedule
