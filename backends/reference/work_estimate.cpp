#include "backends/reference/work_estimate.h"

#include "ir/registry.h"

namespace dstc::reference {

ProgramWork estimate_work(const ir::Module& module, const ir::Function& function) {
  ProgramWork w;
  w.per_op.reserve(function.ops.size());
  for (const ir::Op& op : function.ops) {
    ir::OpCost cost = ir::op_cost(module, function, op);
    // Costs are per device in the program's dtypes; the executor touches
    // each element once whatever its width, so bytes / 4 approximates them.
    double ranks = static_cast<double>(module.members(op.devices).size());
    double work = (cost.flops + cost.bytes / 4) * ranks;
    w.per_op.push_back(work);
    w.total += work;
  }
  for (const ir::Value& value : function.values)
    w.bytes += 8.0 * static_cast<double>(module.type(value.type).numel()) *
               static_cast<double>(module.members(value.devices).size());
  return w;
}

}  // namespace dstc::reference
