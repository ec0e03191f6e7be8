#include "compiler/sbp/boxing_plan.h"

#include <algorithm>

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

}  // namespace

std::vector<AxisTransfer> plan_boxing(const ir::Layout& from, const ir::Layout& to) {
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
  std::vector<AxisTransfer> plan = std::move(removals);
  plan.insert(plan.end(), keeps.begin(), keeps.end());
  plan.insert(plan.end(), additions.rbegin(), additions.rend());
  shrink_first(plan);
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
    if (layout[a].kind == ir::Sbp::Split) bytes /= mesh.axes()[a].size;
  return bytes;
}

double boxing_bytes(const std::vector<AxisTransfer>& plan, const ir::Layout& from, double logical_bytes,
                    const ir::Mesh& mesh) {
  double local = local_bytes(from, logical_bytes, mesh);
  double sent = 0;
  for (const AxisTransfer& t : plan) {
    double p = mesh.axes()[t.axis].size;
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
