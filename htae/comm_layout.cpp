#include "htae/comm_layout.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace dstc::htae {
namespace {

// Union-find over classes.
struct Components {
  std::vector<uint32_t> parent;
  explicit Components(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  uint32_t find(uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(uint32_t a, uint32_t b) { parent[find(a)] = find(b); }
};

// Groups of ranks -> layout: classes joined by sharing a group.
CommLayout build(const ir::Module& module, const std::vector<std::vector<ir::Rank>>& groups,
                 const DeviceClasses& classes, const std::vector<uint32_t>& senders,
                 const std::vector<uint32_t>& receivers) {
  Components uf(classes.count());
  for (const auto& g : groups) {
    for (size_t i = 1; i < g.size(); ++i) uf.join(classes.of_rank(g[0]), classes.of_rank(g[i]));
  }
  CommLayout layout;
  layout.component_of_class.assign(classes.count(), ir::kNone);
  std::vector<uint32_t> component_of_root(classes.count(), ir::kNone);
  auto component = [&](uint32_t c) {
    uint32_t& id = component_of_root[uf.find(c)];
    if (id == ir::kNone) {
      id = static_cast<uint32_t>(layout.components.size());
      layout.components.emplace_back();
    }
    layout.component_of_class[c] = id;
    return id;
  };
  for (uint32_t c : senders) layout.components[component(c)].classes.push_back(c);
  for (uint32_t c : receivers) layout.components[component(c)].receivers.push_back(c);
  for (const auto& g : groups) {
    if (g.empty()) continue;
    std::vector<int64_t> physical;
    physical.reserve(g.size());
    for (ir::Rank r : g) physical.push_back(module.mesh().physical(r));
    layout.components[component(classes.of_rank(g[0]))].groups.push_back(std::move(physical));
  }
  return layout;
}

}  // namespace

CommLayout collective_layout(const ir::Module& module, const ir::Op& op, const DeviceClasses& classes) {
  std::vector<std::vector<ir::Rank>> groups;
  if (op.aux != ir::kNone) {
    groups = module.groups(op.aux);
  } else {
    // Members that agree outside the group axes form a group, in set order.
    const ir::Mesh& mesh = module.mesh();
    std::unordered_map<ir::Rank, size_t> group_of_key;
    for (ir::Rank r : module.members(op.devices)) {
      ir::Rank key = r;
      for (int a = 0; a < mesh.axis_count(); ++a) {
        if (op.group_axes & (1u << a)) key -= mesh.coord(r, a) * mesh.stride(a);
      }
      auto [it, inserted] = group_of_key.emplace(key, groups.size());
      if (inserted) groups.emplace_back();
      groups[it->second].push_back(r);
    }
  }
  return build(module, groups, classes, classes.in_set(op.devices), {});
}

CommLayout p2p_layout(const ir::Module& module, const ir::Op& send, const ir::Op& recv, const DeviceClasses& classes) {
  std::span<const ir::Rank> from = module.members(send.devices);
  std::span<const ir::Rank> to = module.members(send.aux);
  std::vector<std::vector<ir::Rank>> pairs;
  for (size_t k = 0; k < from.size() && k < to.size(); ++k) pairs.push_back({from[k], to[k]});
  return build(module, pairs, classes, classes.in_set(send.devices), classes.in_set(recv.devices));
}

}  // namespace dstc::htae
