#include "compiler/sbp/boxing_plan.h"

#include <algorithm>
#include <array>
#include <bit>

#include "ir/types.h"

namespace dstc::compiler {
namespace {

// How a step changes the local size: 0 shrinks it (reduce_scatter, shard),
// 1 keeps it, 2 grows it (all_gather, unshard).
int size_class(ir::OpKind op) {
  switch (op) {
    case ir::OpKind::ReduceScatter:
    case ir::OpKind::Shard: return 0;
    case ir::OpKind::AllGather:
    case ir::OpKind::Unshard: return 2;
    default: return 1;
  }
}

bool share_a_dim(const AxisTransfer& a, const AxisTransfer& b) {
  for (int x : {a.from_dim, a.to_dim})
    if (x >= 0 && (x == b.from_dim || x == b.to_dim)) return true;
  return false;
}

// Moves steps that shrink the local tensor ahead of those that keep or grow
// it, so every later step moves less. Each step's bytes are proportional to
// the local size when it runs, so this order is the cheapest whatever each
// mesh axis's links cost. Steps on the same tensor dim keep their order:
// their nesting (boxing_plan.h) depends on it.
void shrink_first(std::vector<AxisTransfer>& plan) {
  for (size_t pass = 0; pass < plan.size(); ++pass) {
    for (size_t i = 0; i + 1 < plan.size(); ++i) {
      if (size_class(plan[i + 1].op) < size_class(plan[i].op) && !share_a_dim(plan[i], plan[i + 1]))
        std::swap(plan[i], plan[i + 1]);
    }
  }
}

// Which mesh axes split each tensor dim, as bits. Earlier axes chunk
// outermost (boxing_plan.h), so a step keeps every chunk contiguous only
// where it removes the innermost split of a dim (the latest axis splitting
// it) or adds a new innermost one (after every axis splitting it).
struct Nesting {
  std::array<uint32_t, ir::kMaxRank> splitters{};

  static uint32_t from(int axis) { return ~((1u << axis) - 1); }  // axis and later
  bool can_remove(int axis, int dim) const { return (splitters[dim] & from(axis + 1)) == 0; }
  bool can_add(int axis, int dim) const { return (splitters[dim] & from(axis)) == 0; }
  // The innermost split of `dim` inside `axis`: it must go first.
  int blocking(int axis, int dim) const { return std::bit_width(splitters[dim] & from(axis + 1)) - 1; }

  bool valid(const AxisTransfer& t) const {
    switch (t.op) {
      case ir::OpKind::AllGather:
      case ir::OpKind::Unshard: return can_remove(t.axis, t.from_dim);
      case ir::OpKind::ReduceScatter:
      case ir::OpKind::Shard: return can_add(t.axis, t.to_dim);
      case ir::OpKind::AllToAll: {
        Nesting after = *this;
        after.splitters[t.from_dim] &= ~(1u << t.axis);
        return can_remove(t.axis, t.from_dim) && after.can_add(t.axis, t.to_dim);
      }
      default: return true;
    }
  }
  // The dim whose nesting keeps `t` from running now.
  int blocked_dim(const AxisTransfer& t) const {
    if (t.from_dim >= 0 && !can_remove(t.axis, t.from_dim)) return t.from_dim;
    return t.to_dim;
  }
  void apply(const AxisTransfer& t) {
    if (t.from_dim >= 0) splitters[t.from_dim] &= ~(1u << t.axis);
    if (t.to_dim >= 0) splitters[t.to_dim] |= 1u << t.axis;
  }
};

// Whether `t` adds a split of `dim`, or removes one, on an axis before `axis`.
bool adds_before(const AxisTransfer& t, int dim, int axis) { return t.to_dim == dim && t.axis < axis; }
bool removes_before(const AxisTransfer& t, int dim, int axis) { return t.from_dim == dim && t.axis < axis; }

// The steps in the order given where their nesting allows. A step waits
// while a split of its dim inside its axis remains; a step adding a split
// also waits while the dim's split on an earlier axis is still to come or
// to go. Where every step waits, the innermost split in the way goes first:
// its own pending step if it has one (an all-to-all as its gather, its
// shard last), else a gather, and it is sharded again after the change. An
// all-to-all waiting on a split still to come becomes its gather and shard.
std::vector<AxisTransfer> nested_order(std::vector<AxisTransfer> pending, const ir::Layout& from) {
  Nesting nesting;
  for (int a = 0; a < static_cast<int>(from.size()); ++a)
    if (from[a].kind == ir::Sbp::Split) nesting.splitters[from[a].dim] |= 1u << a;
  auto ready = [&](const AxisTransfer& t) {
    if (!nesting.valid(t)) return false;
    return t.to_dim < 0 || std::none_of(pending.begin(), pending.end(), [&](const AxisTransfer& o) {
             return adds_before(o, t.to_dim, t.axis) || removes_before(o, t.to_dim, t.axis);
           });
  };
  std::vector<AxisTransfer> ordered;
  // Each round places a step or splits one in two: a bound far above any
  // plan's length, so a defect shows as a wrong plan, never a hang.
  for (int round = 0; !pending.empty() && round < 256; ++round) {
    if (auto next = std::find_if(pending.begin(), pending.end(), ready); next != pending.end()) {
      nesting.apply(*next);
      ordered.push_back(*next);
      pending.erase(next);
      continue;
    }
    auto in_the_way = std::find_if(pending.begin(), pending.end(), [&](const AxisTransfer& t) {
      int dim = nesting.blocked_dim(t);
      return dim >= 0 && nesting.blocking(t.axis, dim) >= 0;
    });
    if (in_the_way != pending.end()) {
      int dim = nesting.blocked_dim(*in_the_way);
      int inner = nesting.blocking(in_the_way->axis, dim);
      auto own = std::find_if(pending.begin(), pending.end(),
                              [&](const AxisTransfer& t) { return t.axis == inner && t.from_dim == dim; });
      if (own == pending.end()) {
        pending.insert(pending.begin(), {ir::OpKind::AllGather, inner, dim, -1});
        pending.push_back({ir::OpKind::Shard, inner, -1, dim});
        continue;
      }
      AxisTransfer step = *own;
      pending.erase(own);
      if (step.op == ir::OpKind::AllToAll) {
        pending.push_back({ir::OpKind::Shard, inner, -1, step.to_dim});
        step = {ir::OpKind::AllGather, inner, dim, -1};
      }
      pending.insert(pending.begin(), step);
      continue;
    }
    auto swap = std::find_if(pending.begin(), pending.end(),
                             [](const AxisTransfer& t) { return t.op == ir::OpKind::AllToAll; });
    if (swap == pending.end()) break;  // unreachable: only all-to-alls wait on steps to come
    AxisTransfer t = *swap;
    *swap = {ir::OpKind::AllGather, t.axis, t.from_dim, -1};
    pending.push_back({ir::OpKind::Shard, t.axis, -1, t.to_dim});
  }
  ordered.insert(ordered.end(), pending.begin(), pending.end());
  return ordered;
}

// The axes splitting each dim of a layout, as bits.
std::array<uint32_t, ir::kMaxRank> splitters(const ir::Layout& layout) {
  std::array<uint32_t, ir::kMaxRank> out{};
  for (int a = 0; a < static_cast<int>(layout.size()); ++a)
    if (layout[a].kind == ir::Sbp::Split) out[layout[a].dim] |= 1u << a;
  return out;
}

// Takes out of `all_to_alls` those that one all_to_all over several axes
// does: axes that alone split dim i before and alone split dim j after,
// where j was not split before nor i after. Chunks nest the same way on
// both sides, so the group's row-major order carries every chunk to its
// place, where axis by axis the nesting would force a gather (boxing_plan.h).
std::vector<AxisTransfer> spanning_all_to_alls(std::vector<AxisTransfer>& all_to_alls, const ir::Layout& from,
                                               const ir::Layout& to) {
  const std::array<uint32_t, ir::kMaxRank> before = splitters(from), after = splitters(to);
  std::vector<AxisTransfer> spanning;
  for (int i = 0; i < ir::kMaxRank; ++i) {
    for (int j = 0; j < ir::kMaxRank; ++j) {
      uint32_t axes = before[i];
      if (i == j || std::popcount(axes) < 2 || after[j] != axes || before[j] != 0 || after[i] != 0) continue;
      std::erase_if(all_to_alls, [&](const AxisTransfer& t) {
        return t.op == ir::OpKind::AllToAll && ((axes >> t.axis) & 1u) != 0;
      });
      spanning.push_back({ir::OpKind::AllToAll, std::countr_zero(axes), i, j, false, axes});
    }
  }
  return spanning;
}

// The plan between layouts without S(flat).
std::vector<AxisTransfer> plan_blocks(const ir::Layout& from, const ir::Layout& to) {
  std::vector<AxisTransfer> removals, keeps, additions;
  for (int a = 0; a < static_cast<int>(from.size()); ++a) {
    const ir::Sbp f = from[a], t = to[a];
    if (f == t) continue;
    bool f_split = f.kind == ir::Sbp::Split, t_split = t.kind == ir::Sbp::Split;
    bool f_partial = f.kind == ir::Sbp::PartialSum || f.kind == ir::Sbp::PartialMax;
    bool t_partial = t.kind == ir::Sbp::PartialSum || t.kind == ir::Sbp::PartialMax;
    if (f_split && t_split) {
      removals.push_back({ir::OpKind::AllToAll, a, f.dim, t.dim});
    } else if (f_split) {
      removals.push_back({t_partial ? ir::OpKind::Unshard : ir::OpKind::AllGather, a, f.dim, -1});
    } else if (f_partial && t_split) {
      additions.push_back({ir::OpKind::ReduceScatter, a, -1, t.dim});
    } else if (f_partial) {
      keeps.push_back({ir::OpKind::AllReduce, a, -1, -1});
    } else if (t_split) {
      additions.push_back({ir::OpKind::Shard, a, -1, t.dim});
    } else if (t_partial) {
      keeps.push_back({ir::OpKind::Partialize, a, -1, -1});
    }
  }
  std::vector<AxisTransfer> spanning = spanning_all_to_alls(removals, from, to);
  // Splits go innermost (latest axis) first and come outermost first.
  std::vector<AxisTransfer> plan(removals.rbegin(), removals.rend());
  plan.insert(plan.end(), keeps.begin(), keeps.end());
  plan.insert(plan.end(), additions.begin(), additions.end());
  plan = nested_order(std::move(plan), from);
  plan.insert(plan.begin(), spanning.begin(), spanning.end());
  shrink_first(plan);
  return plan;
}

}  // namespace

std::vector<AxisTransfer> plan_boxing(const ir::Layout& from, const ir::Layout& to) {
  if (from == to) return {};
  // The axes each side flattens over: gathered and flattened in one step
  // each, however many (one collective over all of them).
  const uint32_t gather = ir::flat_axes(from), flat = ir::flat_axes(to);
  auto first_axis = [](uint32_t bits) { return bits == 0 ? 0 : std::countr_zero(bits); };
  auto span_of = [](uint32_t bits) { return std::popcount(bits) > 1 ? bits : 0u; };
  ir::Layout block_from = from, block_to = to;
  for (size_t a = 0; a < from.size(); ++a)
    if ((gather >> a) & 1u) block_from[a] = ir::Sbp{};
  // A P or B on the axes to flatten stays through the block's plan and
  // becomes one reduce_scatter or shard; where they mix, the B axes are
  // partialized first and all reduce-scattered together.
  bool partial = false, whole = false;
  for (size_t a = 0; a < to.size(); ++a) {
    if (!((flat >> a) & 1u)) continue;
    const ir::Sbp::Kind kind = block_from[a].kind;
    (kind == ir::Sbp::PartialSum || kind == ir::Sbp::PartialMax ? partial : whole) = true;
  }
  const bool mixed = partial && whole;
  for (size_t a = 0; a < to.size(); ++a) {
    if (!((flat >> a) & 1u)) continue;
    const ir::Sbp before = block_from[a];
    const bool p = before.kind == ir::Sbp::PartialSum || before.kind == ir::Sbp::PartialMax;
    block_to[a] = p ? before : mixed ? ir::Sbp{ir::Sbp::PartialSum, 0} : ir::Sbp{};
  }
  std::vector<AxisTransfer> middle = plan_blocks(block_from, block_to);
  const AxisTransfer gather_step{ir::OpKind::AllGather, first_axis(gather), -1, -1, true, span_of(gather)};
  const AxisTransfer flatten_step{
      partial ? ir::OpKind::ReduceScatter : ir::OpKind::Shard, first_axis(flat), -1, -1, true, span_of(flat)};
  // All-reduces and partializes act elementwise, on a flat chunk as on the
  // block: they run between flattening first and gathering last, so they
  // move the chunk (HSDP's cross-node all-reduce of the shard).
  bool elementwise = !mixed && std::all_of(middle.begin(), middle.end(), [](const AxisTransfer& t) {
    return t.op == ir::OpKind::AllReduce || t.op == ir::OpKind::Partialize;
  });
  if (gather != 0 && gather == flat && elementwise) return middle;
  std::vector<AxisTransfer> plan;
  if (elementwise && (gather == 0 || flat == 0)) {
    if (flat != 0) plan.push_back(flatten_step);
    plan.insert(plan.end(), middle.begin(), middle.end());
    if (gather != 0) plan.push_back(gather_step);
    return plan;
  }
  // Otherwise the block's steps need the whole block: gather first, flatten last.
  if (gather != 0) plan.push_back(gather_step);
  plan.insert(plan.end(), middle.begin(), middle.end());
  if (flat != 0) plan.push_back(flatten_step);
  return plan;
}

bool gathers(const ir::Layout& from, const ir::Layout& to) {
  if (from == to) return false;
  std::vector<AxisTransfer> plan = plan_boxing(from, to);
  return std::any_of(plan.begin(), plan.end(), [](const AxisTransfer& t) { return t.op == ir::OpKind::AllGather; });
}

double local_bytes(const ir::Layout& layout, double logical_bytes, const ir::Mesh& mesh) {
  double bytes = logical_bytes;
  for (int a = 0; a < static_cast<int>(layout.size()); ++a)
    if (layout[a].kind == ir::Sbp::Split || layout[a].kind == ir::Sbp::Flat) bytes /= mesh.axes()[a].size;
  return bytes;
}

int64_t step_group_size(const AxisTransfer& t, const ir::Mesh& mesh) {
  int64_t p = 1;
  for (int a = 0; a < mesh.axis_count(); ++a)
    if ((step_axes(t) >> a) & 1u) p *= mesh.axes()[a].size;
  return p;
}

double boxing_bytes(const std::vector<AxisTransfer>& plan, const ir::Layout& from, double logical_bytes,
                    const ir::Mesh& mesh) {
  double local = local_bytes(from, logical_bytes, mesh);
  double sent = 0;
  for (const AxisTransfer& t : plan) {
    auto p = static_cast<double>(step_group_size(t, mesh));
    switch (t.op) {
      case ir::OpKind::AllGather:
        sent += (p - 1) * local;
        local *= p;
        break;
      case ir::OpKind::AllReduce: sent += 2 * (p - 1) / p * local; break;
      case ir::OpKind::ReduceScatter:
        sent += (p - 1) / p * local;
        local /= p;
        break;
      case ir::OpKind::AllToAll: sent += (p - 1) / p * local; break;
      case ir::OpKind::Shard: local /= p; break;
      case ir::OpKind::Unshard: local *= p; break;
      default: break;  // partialize: nothing moves
    }
  }
  return sent;
}

}  // namespace dstc::compiler
