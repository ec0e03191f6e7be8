// Deadlock detection: runs the schedule with blocking communication and
// reports a stuck state as a cycle of ranks waiting for each other.
#include <algorithm>
#include <deque>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/groups.h"
#include "ir/queues.h"
#include "ir/registry.h"
#include "ir/source/diagnostic_kinds.h"
#include "ir/symmetry.h"
#include "ir/verifier.h"

namespace dstc::ir {

namespace {

constexpr int kQueues = kQueueCount;

class ScheduleRun {
 public:
  ScheduleRun(const Module& m, const Function& f)
      : m_(m), f_(f), partner_(pair_channels(f)), classes_(rank_classes(m, f)) {
    auto queues = classes_.representative.size() * kQueues;
    // The representatives in each device set, found once per set: ops
    // outnumber sets by far.
    std::vector<std::vector<Rank>> representatives(m.device_set_count());
    std::vector<uint8_t> listed(m.device_set_count(), 0);
    auto representatives_in = [&](DeviceSetId s) -> const std::vector<Rank>& {
      if (!listed[s]) {
        listed[s] = 1;
        for (Rank r : m.members(s)) {
          if (is_representative(r)) representatives[s].push_back(r);
        }
      }
      return representatives[s];
    };
    offsets_.assign(queues + 1, 0);
    for (const Op& op : f.ops) {
      for (Rank r : representatives_in(op.devices)) ++offsets_[queue(r, op_queue(op)) + 1];
    }
    for (size_t q = 0; q < queues; ++q) offsets_[q + 1] += offsets_[q];
    order_.resize(offsets_.back());
    std::vector<uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
    for (OpId i = 0; i < f.ops.size(); ++i) {
      for (Rank r : representatives[f.ops[i].devices]) order_[fill[queue(r, op_queue(f.ops[i]))]++] = i;
    }
    pos_.assign(queues, 0);
  }

  // Runs until no queue can move; true when every queue finished.
  bool run() {
    std::deque<uint32_t> work;
    std::vector<bool> queued(pos_.size(), true);
    for (uint32_t q = 0; q < pos_.size(); ++q) work.push_back(q);
    while (!work.empty()) {
      uint32_t q = work.front();
      work.pop_front();
      queued[q] = false;
      while (head(q) != kNone && fire(q, work, queued)) {
      }
    }
    for (uint32_t q = 0; q < pos_.size(); ++q) {
      if (head(q) != kNone) return false;
    }
    return true;
  }

  void report(DiagnosticEngine& diags) const {
    uint32_t start = 0;
    while (head(start) == kNone) ++start;
    std::unordered_map<uint32_t, size_t> seen;
    std::vector<std::pair<uint32_t, std::string>> steps;
    uint32_t q = start;
    while (!seen.count(q)) {
      seen.emplace(q, steps.size());
      auto [next, why] = blocker(q);
      steps.emplace_back(q, std::move(why));
      q = next;
    }
    size_t first = seen[q];
    size_t stuck = 0;  // counting every rank of a class
    for (uint32_t s = 0; s < pos_.size(); ++s) stuck += head(s) != kNone ? classes_.size[s / kQueues] : 0;
    OpId at = head(steps[first].first);
    auto builder = diags.error(
        diag::kIrDeadlock, f_.op_range(at),
        fmt::format("in @{}: deadlock: {} ranks wait for each other in a cycle ({} device streams cannot finish)",
                    f_.name, steps.size() - first, stuck));
    // A long cycle is shown by its first links and a count.
    constexpr size_t kShownLinks = 8;
    for (size_t k = first; k < steps.size() && k < first + kShownLinks; ++k) {
      uint32_t sq = steps[k].first;
      builder.note(f_.op_range(head(sq)),
                   fmt::format("{} is blocked on its {} stream at '{}': {}", describe_rank(sq),
                               queue_name(queue_of(sq)), op_label(m_, f_, head(sq)), steps[k].second));
    }
    if (steps.size() - first > kShownLinks)
      builder.note(fmt::format("and {} more ranks in the cycle", steps.size() - first - kShownLinks));
  }

 private:
  // One queue per (class of symmetric ranks, ir/queues.h queue), run by its representative.
  uint32_t queue(Rank r, int q) const {
    return classes_.class_of[static_cast<size_t>(r)] * kQueues + static_cast<uint32_t>(q);
  }
  Rank rank_of(uint32_t q) const { return classes_.representative[q / kQueues]; }
  bool is_representative(Rank r) const { return rank_of(queue(r, static_cast<int>(Stream::Compute))) == r; }
  std::string describe_rank(uint32_t q) const {
    uint32_t size = classes_.size[q / kQueues];
    return size > 1 ? fmt::format("rank {} (one of {} symmetric ranks)", rank_of(q), size)
                    : fmt::format("rank {}", rank_of(q));
  }
  static int queue_of(uint32_t q) { return static_cast<int>(q % kQueues); }

  OpId head(uint32_t q) const {
    uint32_t index = offsets_[q] + pos_[q];
    return index < offsets_[q + 1] ? order_[index] : kNone;
  }
  bool done_on(OpId j, Rank r) const { return head(queue(r, op_queue(f_.ops[j]))) > j; }

  // The first operand of op i not yet computed on rank r, or kNone.
  ValueId missing_operand(OpId i, Rank r) const {
    for (ValueId v : f_.operands(f_.ops[i])) {
      OpId def = f_.values[v].def;
      if (def != kNone && !done_on(def, r)) return v;
    }
    return kNone;
  }

  // Who must be at which op for op i, seen from rank r, to run: the
  // representatives of the ranks involved.
  void participants(OpId i, Rank r, std::vector<std::pair<Rank, OpId>>& out) const {
    out.clear();
    const Op& op = f_.ops[i];
    const OpInfo& info = op_info(op.kind);
    auto add = [&](Rank p, OpId at) {
      Rank rep = rank_of(queue(p, static_cast<int>(Stream::Compute)));
      for (const auto& seen : out) {
        if (seen.first == rep && seen.second == at) return;
      }
      out.emplace_back(rep, at);
    };
    if (info.category == OpCategory::Collective) {
      for (Rank p : group_representatives(op, r)) out.emplace_back(p, i);
    } else if (info.category == OpCategory::PointToPoint) {
      add(r, i);
      std::optional<Rank> peer = p2p_peer(m_, op, r);
      if (peer && partner_[i] != kNone) add(*peer, partner_[i]);
    } else {
      add(r, i);
    }
  }

  // The representatives of the members of rank r's group, once per
  // collective shape (ops repeat over layers and micro-batches).
  const std::vector<Rank>& group_representatives(const Op& op, Rank r) const {
    GroupKey key{op.devices, op.aux, r, op.group_axes};
    auto [it, fresh] = group_representatives_.try_emplace(key);
    if (fresh) {
      for (Rank p : group_of(m_, op, r)) {
        Rank rep = rank_of(queue(p, static_cast<int>(Stream::Compute)));
        if (std::find(it->second.begin(), it->second.end(), rep) == it->second.end()) it->second.push_back(rep);
      }
    }
    return it->second;
  }

  bool fire(uint32_t q, std::deque<uint32_t>& work, std::vector<bool>& queued) {
    OpId i = head(q);
    participants(i, rank_of(q), scratch_);
    for (const auto& [p, op] : scratch_) {
      if (head(queue(p, op_queue(f_.ops[op]))) != op || missing_operand(op, p) != kNone) return false;
    }
    for (const auto& [p, op] : scratch_) ++pos_[queue(p, op_queue(f_.ops[op]))];
    for (const auto& [p, op] : scratch_) {
      for (int s = 0; s < kQueues; ++s) {
        uint32_t w = queue(p, s);
        if (!queued[w] && w != q) {
          queued[w] = true;
          work.push_back(w);
        }
      }
    }
    return true;
  }

  // The queue a stuck queue waits for, and why.
  std::pair<uint32_t, std::string> blocker(uint32_t q) const {
    OpId i = head(q);
    Rank r = rank_of(q);
    ValueId v = missing_operand(i, r);
    if (v != kNone) {
      OpId def = f_.values[v].def;
      return {queue(r, op_queue(f_.ops[def])),
              fmt::format("it needs %{}, which '{}' on its {} stream has not computed", m_.value_name(f_, v),
                          op_label(m_, f_, def), stream_name(f_.ops[def].stream))};
    }
    std::vector<std::pair<Rank, OpId>> who;
    participants(i, r, who);
    for (const auto& [p, op] : who) {
      uint32_t pq = queue(p, op_queue(f_.ops[op]));
      if (pq == q) continue;
      OpId there = head(pq);
      if (there != op) {
        std::string where =
            there == kNone ? "has finished its program" : fmt::format("is at '{}'", op_label(m_, f_, there));
        return {pq, fmt::format("it waits for {} to reach '{}', but rank {} {}", describe_rank(pq),
                                op_label(m_, f_, op), rank_of(pq), where)};
      }
      if (missing_operand(op, p) != kNone)
        return {pq, fmt::format("it waits for {}, whose operands are not ready", describe_rank(pq))};
    }
    return {q, "it cannot proceed"};
  }

  const Module& m_;
  const Function& f_;
  std::vector<OpId> partner_;
  RankClasses classes_;
  std::vector<uint32_t> offsets_;  // queue q's ops: order_[offsets_[q] .. offsets_[q+1])
  std::vector<OpId> order_;
  std::vector<uint32_t> pos_;
  std::vector<std::pair<Rank, OpId>> scratch_;
  struct GroupKey {
    DeviceSetId devices;
    uint32_t aux;
    Rank rank;
    uint16_t group_axes;
    bool operator==(const GroupKey&) const = default;
  };
  struct GroupKeyHash {
    size_t operator()(const GroupKey& k) const {
      uint64_t h = (static_cast<uint64_t>(k.devices) << 32) ^ k.aux;
      h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.rank)) << 16) ^ k.group_axes;
      return std::hash<uint64_t>{}(h * 0x9E3779B97F4A7C15ULL);
    }
  };
  mutable std::unordered_map<GroupKey, std::vector<Rank>, GroupKeyHash> group_representatives_;  // a cache
};

}  // namespace

bool check_deadlock(const Module& module, const Function& f, DiagnosticEngine& diags) {
  if (module.mesh().empty()) return true;
  ScheduleRun run(module, f);
  if (run.run()) return true;
  run.report(diags);
  return false;
}

}  // namespace dstc::ir
