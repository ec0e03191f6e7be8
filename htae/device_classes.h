// Symmetry: ranks that belong to exactly the same device sets of a function
// (the sets its ops run on, its values live on, its sends target) run the
// same program in the same order, so the simulator runs one representative
// per class. Without symmetry every rank is its own class.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/module.h"

namespace dstc::htae {

class DeviceClasses {
 public:
  DeviceClasses(const ir::Module& module, const ir::Function& f, bool symmetry);

  size_t count() const { return members_.size(); }
  uint32_t of_rank(ir::Rank r) const { return class_of_rank_[static_cast<size_t>(r)]; }
  // Ranks of a class, ascending; the first is its representative.
  const std::vector<ir::Rank>& members(uint32_t c) const { return members_[c]; }
  // The classes whose ranks lie in a device set, ascending (every class
  // lies wholly inside or outside each set the function uses).
  const std::vector<uint32_t>& in_set(ir::DeviceSetId set) const { return set_classes_[set]; }

 private:
  std::vector<uint32_t> class_of_rank_;
  std::vector<std::vector<ir::Rank>> members_;
  std::vector<std::vector<uint32_t>> set_classes_;
};

}  // namespace dstc::htae
