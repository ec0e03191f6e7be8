#include "ir/symmetry.h"

#include <map>
#include <tuple>
#include <unordered_map>

#include "ir/groups.h"
#include "ir/registry.h"

namespace dstc::ir {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 31);
}

// Dense class ids for signatures, numbered in rank order; the class count.
uint32_t number_classes(const std::vector<uint64_t>& signature, std::vector<uint32_t>& class_of) {
  std::unordered_map<uint64_t, uint32_t> ids;
  for (size_t r = 0; r < signature.size(); ++r) {
    auto [it, inserted] = ids.emplace(signature[r], static_cast<uint32_t>(ids.size()));
    class_of[r] = it->second;
  }
  return static_cast<uint32_t>(ids.size());
}

}  // namespace

RankClasses rank_classes(const Module& module, const Function& f) {
  auto ranks = static_cast<size_t>(module.mesh().size());
  // Ops repeat over layers and micro-batches on a few device sets: two
  // ranks are covered by the same ops exactly when they lie in the same
  // sets used, and communicating ops with one shape (kind, set, axes,
  // peers or groups) constrain their members alike. So the refinement
  // runs over the distinct sets and shapes, not over every op.
  std::vector<uint8_t> used(module.device_set_count(), 0);
  std::map<std::tuple<OpKind, DeviceSetId, uint32_t, uint32_t>, OpId> shapes;
  for (OpId i = 0; i < f.ops.size(); ++i) {
    const Op& op = f.ops[i];
    used[op.devices] = 1;
    OpCategory category = op_info(op.kind).category;
    if (category == OpCategory::PointToPoint || category == OpCategory::Collective)
      shapes.try_emplace({op.kind, op.devices, op.group_axes, op.aux}, i);
  }
  std::vector<uint64_t> signature(ranks, 0);
  for (DeviceSetId s = 0; s < used.size(); ++s) {
    if (!used[s]) continue;
    for (Rank r : module.members(s)) signature[static_cast<size_t>(r)] = mix(signature[static_cast<size_t>(r)], s);
  }
  RankClasses c;
  c.class_of.resize(ranks);
  uint32_t count = number_classes(signature, c.class_of);

  // Refine by the classes of peers and group members until stable.
  while (true) {
    std::vector<uint64_t> refined(ranks);
    for (size_t r = 0; r < ranks; ++r) refined[r] = c.class_of[r];
    uint64_t shape = 0;
    for (const auto& [key, i] : shapes) {
      const Op& op = f.ops[i];
      ++shape;
      if (op_info(op.kind).category == OpCategory::PointToPoint) {
        for (Rank r : module.members(op.devices)) {
          std::optional<Rank> peer = p2p_peer(module, op, r);
          uint64_t peer_class = peer ? c.class_of[static_cast<size_t>(*peer)] : UINT64_MAX;
          refined[static_cast<size_t>(r)] = mix(refined[static_cast<size_t>(r)], mix(shape, peer_class));
        }
      } else {
        for (const std::vector<Rank>& g : groups_of(module, op)) {
          uint64_t members = 0;  // order-free: a sum of mixed classes
          for (Rank m : g) members += mix(shape, c.class_of[static_cast<size_t>(m)]);
          for (size_t k = 0; k < g.size(); ++k) {
            // Rooted collectives treat their root differently.
            uint64_t position = op.kind == OpKind::Broadcast || op.kind == OpKind::Reduce ||
                                        op.kind == OpKind::Scatter || op.kind == OpKind::Gather
                                    ? k
                                    : 0;
            auto& h = refined[static_cast<size_t>(g[k])];
            h = mix(h, mix(members, position));
          }
        }
      }
    }
    std::vector<uint32_t> next(ranks);
    uint32_t next_count = number_classes(refined, next);
    c.class_of = std::move(next);
    if (next_count == count) break;
    count = next_count;
  }
  c.representative.assign(count, -1);
  c.size.assign(count, 0);
  for (size_t r = 0; r < ranks; ++r) {
    uint32_t k = c.class_of[r];
    if (c.representative[k] < 0) c.representative[k] = static_cast<Rank>(r);
    ++c.size[k];
  }
  return c;
}

}  // namespace dstc::ir
