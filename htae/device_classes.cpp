#include "htae/device_classes.h"

#include <algorithm>
#include <numeric>

#include "ir/registry.h"

namespace dstc::htae {

DeviceClasses::DeviceClasses(const ir::Module& module, const ir::Function& f, bool symmetry) {
  auto ranks = static_cast<size_t>(module.mesh().size());
  class_of_rank_.assign(ranks, 0);
  if (!symmetry) {
    std::iota(class_of_rank_.begin(), class_of_rank_.end(), 0u);
  } else {
    // Partition refinement: split every class by membership of each set used.
    std::vector<bool> used(module.device_set_count(), false);
    for (const ir::Op& op : f.ops) {
      used[op.devices] = true;
      if (ir::op_info(op.kind).category == ir::OpCategory::PointToPoint && op.aux != ir::kNone) used[op.aux] = true;
    }
    for (const ir::Value& v : f.values) used[v.devices] = true;
    std::vector<uint32_t> split_to;  // old class -> its new id for members inside the set
    uint32_t classes = ranks > 0 ? 1 : 0;
    for (ir::DeviceSetId s = 0; s < used.size(); ++s) {
      if (!used[s]) continue;
      split_to.assign(classes, ir::kNone);
      std::vector<size_t> inside(classes, 0), total(classes, 0);
      for (uint32_t c : class_of_rank_) ++total[c];
      for (ir::Rank r : module.members(s)) ++inside[class_of_rank_[static_cast<size_t>(r)]];
      for (ir::Rank r : module.members(s)) {
        uint32_t& c = class_of_rank_[static_cast<size_t>(r)];
        if (inside[c] == total[c]) continue;  // the whole class is inside: no split
        if (split_to[c] == ir::kNone) split_to[c] = classes++;
        c = split_to[c];
      }
    }
  }
  // Renumber by first rank so that class ids follow rank order.
  std::vector<uint32_t> renumber(ranks, ir::kNone);
  uint32_t next = 0;
  for (uint32_t& c : class_of_rank_) {
    if (renumber[c] == ir::kNone) renumber[c] = next++;
    c = renumber[c];
  }
  members_.resize(next);
  for (size_t r = 0; r < ranks; ++r) members_[class_of_rank_[r]].push_back(static_cast<ir::Rank>(r));
  set_classes_.resize(module.device_set_count());
  for (ir::DeviceSetId s = 0; s < set_classes_.size(); ++s) {
    std::vector<uint32_t>& list = set_classes_[s];
    for (ir::Rank r : module.members(s)) list.push_back(class_of_rank_[static_cast<size_t>(r)]);
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
}

}  // namespace dstc::htae
