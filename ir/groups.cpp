#include "ir/groups.h"

#include <algorithm>
#include <unordered_map>

#include "ir/registry.h"

namespace dstc::ir {

namespace {

bool is_collective(const Op& op) { return op_info(op.kind).category == OpCategory::Collective; }

// Position of r among the members of a set, or -1.
int64_t member_index(const Module& module, DeviceSetId id, Rank r) {
  const DeviceSet& set = module.devices(id);
  if (!set.is_slice()) {
    auto it = std::find(set.ranks.begin(), set.ranks.end(), r);
    return it == set.ranks.end() ? -1 : it - set.ranks.begin();
  }
  if (!module.contains(id, r)) return -1;
  int64_t index = 0;
  for (int a = 0; a < module.mesh().axis_count(); ++a) {
    const AxisRange& range = set.ranges[static_cast<size_t>(a)];
    index = index * range.size() + (module.mesh().coord(r, a) - range.begin);
  }
  return index;
}

bool same_outside_axes(const Mesh& mesh, Rank a, Rank b, uint16_t axes) {
  for (int i = 0; i < mesh.axis_count(); ++i) {
    if (!(axes & (1u << i)) && mesh.coord(a, i) != mesh.coord(b, i)) return false;
  }
  return true;
}

}  // namespace

int64_t group_size(const Module& module, const Op& op) {
  if (!is_collective(op)) return 1;
  if (op.aux != kNone) {
    const auto& groups = module.groups(op.aux);
    return groups.empty() ? 0 : static_cast<int64_t>(groups.front().size());
  }
  const DeviceSet& set = module.devices(op.devices);
  if (!set.is_slice()) {
    std::span<const Rank> members = module.members(op.devices);
    return members.empty() ? 0 : static_cast<int64_t>(group_of(module, op, members.front()).size());
  }
  int64_t size = 1;
  for (int a = 0; a < module.mesh().axis_count(); ++a) {
    if (op.group_axes & (1u << a)) size *= set.ranges[static_cast<size_t>(a)].size();
  }
  return size;
}

int64_t group_count(const Module& module, const Op& op) {
  if (!is_collective(op)) return 0;
  if (op.aux != kNone) return static_cast<int64_t>(module.groups(op.aux).size());
  int64_t size = group_size(module, op);
  return size == 0 ? 0 : static_cast<int64_t>(module.members(op.devices).size()) / size;
}

std::vector<Rank> group_of(const Module& module, const Op& op, Rank r) {
  std::vector<Rank> group;
  if (op.aux != kNone) {
    for (const std::vector<Rank>& g : module.groups(op.aux)) {
      if (std::find(g.begin(), g.end(), r) != g.end()) return g;
    }
    return group;
  }
  if (!module.contains(op.devices, r)) return group;
  const DeviceSet& set = module.devices(op.devices);
  if (!set.is_slice()) {
    // Members of the list that agree with r outside the group axes, in list order.
    for (Rank m : module.members(op.devices)) {
      if (same_outside_axes(module.mesh(), m, r, op.group_axes)) group.push_back(m);
    }
    return group;
  }
  // A slice: vary the group axes over their ranges, row-major, keeping r's
  // other coordinates; O(group size).
  const Mesh& mesh = module.mesh();
  std::vector<int> axes;
  Rank base = r;
  for (int a = 0; a < mesh.axis_count(); ++a) {
    if (!(op.group_axes & (1u << a))) continue;
    axes.push_back(a);
    base -= (mesh.coord(r, a) - set.ranges[static_cast<size_t>(a)].begin) * mesh.stride(a);
  }
  std::vector<int32_t> offset(axes.size(), 0);
  for (;;) {
    Rank m = base;
    for (size_t i = 0; i < axes.size(); ++i) m += offset[i] * mesh.stride(axes[i]);
    group.push_back(m);
    size_t i = axes.size();
    while (i > 0 && ++offset[i - 1] == set.ranges[static_cast<size_t>(axes[i - 1])].size()) {
      offset[i - 1] = 0;
      --i;
    }
    if (i == 0) break;
  }
  return group;
}

std::vector<std::vector<Rank>> groups_of(const Module& module, const Op& op) {
  if (op.aux != kNone) return module.groups(op.aux);
  std::vector<std::vector<Rank>> groups;
  std::vector<bool> seen(static_cast<size_t>(module.mesh().size()), false);
  for (Rank m : module.members(op.devices)) {
    if (seen[static_cast<size_t>(m)]) continue;
    groups.push_back(group_of(module, op, m));
    for (Rank g : groups.back()) seen[static_cast<size_t>(g)] = true;
  }
  return groups;
}

std::optional<Rank> p2p_peer(const Module& module, const Op& op, Rank r) {
  if (op_info(op.kind).category != OpCategory::PointToPoint || op.aux == kNone) return std::nullopt;
  int64_t k = member_index(module, op.devices, r);
  std::span<const Rank> peers = module.members(op.aux);
  if (k < 0 || static_cast<size_t>(k) >= peers.size()) return std::nullopt;
  return peers[static_cast<size_t>(k)];
}

std::vector<OpId> pair_channels(const Function& f) {
  struct Ends {
    OpId send = kNone;
    OpId recv = kNone;
    int sends = 0;
    int recvs = 0;
  };
  std::unordered_map<uint32_t, Ends> channels;
  for (OpId i = 0; i < f.ops.size(); ++i) {
    const Op& op = f.ops[i];
    if (op.kind == OpKind::Send) {
      Ends& e = channels[op.channel];
      e.send = i;
      ++e.sends;
    } else if (op.kind == OpKind::Recv) {
      Ends& e = channels[op.channel];
      e.recv = i;
      ++e.recvs;
    }
  }
  std::vector<OpId> partner(f.ops.size(), kNone);
  for (const auto& [channel, e] : channels) {
    if (e.sends == 1 && e.recvs == 1) {
      partner[e.send] = e.recv;
      partner[e.recv] = e.send;
    }
  }
  return partner;
}

int64_t bytes_in_operand(const Module& module, const Function& f, const Op& op) {
  if (op.kind != OpKind::AllGather || op.operand_count != 1 || !AttrReader(module, f, op).boolean("in_place")) return 0;
  return module.value_bytes(f, f.operands(op)[0]);
}

}  // namespace dstc::ir
