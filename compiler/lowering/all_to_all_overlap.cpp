#include "compiler/lowering/all_to_all_overlap.h"

#include <algorithm>
#include <unordered_map>

namespace dstc::compiler {
namespace {

bool is_backward(schedule::ActionKind k) {
  return k == schedule::ActionKind::Backward || k == schedule::ActionKind::InputGrad;
}

struct Pair {
  ActionOps forward, backward;
};

bool holds_all_to_all(const ir::Function& f, ActionOps block) {
  for (uint32_t i = block.begin; i < block.end; ++i)
    if (f.ops[i].kind == ir::OpKind::AllToAll) return true;
  return false;
}

bool defined_in(const ir::Function& f, ir::ValueId v, ActionOps block) {
  const ir::OpId def = f.values[v].def;
  return def != ir::kNone && def >= block.begin && def < block.end;
}

// Whether the forward block can move to the backward's place: nothing
// between them or in the backward reads what it writes, and each of its
// sends still comes before its receive.
bool movable(const ir::Function& f, const Pair& p, const std::unordered_map<uint32_t, uint32_t>& recv_at) {
  for (uint32_t i = p.forward.end; i < p.backward.end; ++i)
    for (ir::ValueId v : f.operands(f.ops[i]))
      if (defined_in(f, v, p.forward)) return false;
  for (uint32_t i = p.forward.begin; i < p.forward.end; ++i) {
    const ir::Op& op = f.ops[i];
    if (op.kind != ir::OpKind::Send) continue;
    auto recv = recv_at.find(op.channel);
    if (recv != recv_at.end() && recv->second < p.backward.end) return false;
  }
  return true;
}

// The two blocks in turns, forward first, each turn up to and including
// its next all-to-all.
void append_interleaved(const ir::Function& f, const Pair& p, std::vector<uint32_t>& order) {
  uint32_t next[2] = {p.forward.begin, p.backward.begin};
  const uint32_t end[2] = {p.forward.end, p.backward.end};
  for (int turn = 0; next[0] < end[0] || next[1] < end[1]; turn = 1 - turn) {
    while (next[turn] < end[turn]) {
      const uint32_t i = next[turn]++;
      order.push_back(i);
      if (f.ops[i].kind == ir::OpKind::AllToAll) break;
    }
  }
}

}  // namespace

void interleave_at_all_to_alls(ir::Function& f, const schedule::ScheduleTable& table,
                               const std::vector<std::vector<ActionOps>>& action_ops) {
  std::unordered_map<uint32_t, uint32_t> recv_at;
  for (uint32_t i = 0; i < f.ops.size(); ++i)
    if (f.ops[i].kind == ir::OpKind::Recv) recv_at[f.ops[i].channel] = i;
  std::vector<Pair> pairs;
  for (size_t r = 0; r < table.ranks.size(); ++r) {
    const std::vector<schedule::Action>& actions = table.ranks[r];
    for (size_t i = 0; i + 1 < actions.size(); ++i) {
      const schedule::Action &a = actions[i], &b = actions[i + 1];
      if (a.kind != schedule::ActionKind::Forward || !is_backward(b.kind) || a.micro_batch == b.micro_batch) continue;
      if (table.names_pairs && !a.pairs_with_next) continue;
      const Pair p{action_ops[r][i], action_ops[r][i + 1]};
      if (p.forward.end > p.backward.begin) continue;
      if (!holds_all_to_all(f, p.forward) && !holds_all_to_all(f, p.backward)) continue;
      if (!movable(f, p, recv_at)) continue;
      pairs.push_back(p);
      ++i;
    }
  }
  if (pairs.empty()) return;
  // Where each moved forward starts (skipped) and each paired backward
  // starts (both emitted), in op order.
  struct Mark {
    uint32_t at;
    bool backward;
    size_t pair;
  };
  std::vector<Mark> marks;
  for (size_t k = 0; k < pairs.size(); ++k) {
    marks.push_back({pairs[k].forward.begin, false, k});
    marks.push_back({pairs[k].backward.begin, true, k});
  }
  std::sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) { return a.at < b.at; });
  std::vector<uint32_t> order;
  order.reserve(f.ops.size());
  size_t m = 0;
  for (uint32_t i = 0; i < f.ops.size();) {
    while (m < marks.size() && marks[m].at < i) ++m;
    if (m < marks.size() && marks[m].at == i) {
      const Pair& p = pairs[marks[m].pair];
      if (marks[m].backward) {
        append_interleaved(f, p, order);
        i = p.backward.end;
      } else {
        i = p.forward.end;
      }
      ++m;
      continue;
    }
    order.push_back(i++);
  }
  std::vector<ir::Op> ops;
  ops.reserve(f.ops.size());
  for (uint32_t i : order) ops.push_back(f.ops[i]);
  f.ops = std::move(ops);
  for (ir::OpId id = 0; id < f.ops.size(); ++id) {
    const ir::Op& op = f.ops[id];
    for (int i = 0; i < op.result_count; ++i) f.values[op.first_result + i].def = id;
  }
}

}  // namespace dstc::compiler
