#include "htae/memory_lower_bound.h"

#include <algorithm>
#include <vector>

namespace dstc::htae {

MemoryLowerBound memory_lower_bound(const ir::Module& module, const ir::Function& f) {
  const auto ranks = static_cast<size_t>(module.mesh().size());
  std::vector<int64_t> resident(ranks, 0);
  std::vector<uint8_t> is_arg(f.values.size(), 0);
  for (const ir::Arg& a : f.args) {
    is_arg[a.value] = 1;
    int64_t bytes = module.value_type(f, a.value).bytes();
    for (ir::Rank r : module.members(f.values[a.value].devices)) resident[static_cast<size_t>(r)] += bytes;
  }
  // The largest working set per device set first: ops repeat per layer and
  // micro-batch on a few sets.
  std::vector<int64_t> working_of_set;
  std::vector<ir::ValueId> counted;
  for (const ir::Op& op : f.ops) {
    if (op.phase != ir::Phase::Forward) continue;
    int64_t working = 0;
    counted.clear();
    for (ir::ValueId v : f.operands(op)) {
      // An operand held on only some of the op's devices is left out: the
      // bound stays below what every device of the set holds.
      if (is_arg[v] || (f.values[v].devices != op.devices && !module.includes(f.values[v].devices, op.devices)))
        continue;
      if (std::find(counted.begin(), counted.end(), v) != counted.end()) continue;
      counted.push_back(v);
      working += module.value_type(f, v).bytes();
    }
    for (uint16_t r = 0; r < op.result_count; ++r) working += module.value_type(f, op.first_result + r).bytes();
    if (op.devices >= working_of_set.size()) working_of_set.resize(op.devices + 1, 0);
    working_of_set[op.devices] = std::max(working_of_set[op.devices], working);
  }
  std::vector<int64_t> working(ranks, 0);
  for (ir::DeviceSetId set = 0; set < working_of_set.size(); ++set) {
    if (working_of_set[set] == 0) continue;
    for (ir::Rank r : module.members(set)) {
      working[static_cast<size_t>(r)] = std::max(working[static_cast<size_t>(r)], working_of_set[set]);
    }
  }
  MemoryLowerBound bound;
  for (size_t r = 0; r < ranks; ++r) {
    if (resident[r] + working[r] <= bound.bytes && r > 0) continue;
    bound = {resident[r] + working[r], static_cast<ir::Rank>(r), resident[r], working[r]};
  }
  return bound;
}

}  // namespace dstc::htae
