// A lower bound of the simulator's peak memory per device, from the IR
// alone, without running it: what `dstc search` uses to set aside
// configurations that cannot fit before paying for their simulation.
//
// The simulator keeps every argument (parameters, optimizer states, inputs)
// for the whole step and allocates an op's results when it starts, while its
// operands are still held, so each device holds at least its arguments plus,
// for any one op it runs, that op's operands and results. Only forward ops
// are counted: their shapes do not depend on the number of micro-batches, so
// the bound of a one-micro-batch compile of a strategy also bounds the
// strategy itself (search_memory_probe.h).
#pragma once

#include <cstdint>

#include "ir/mesh.h"
#include "ir/module.h"

namespace dstc::htae {

struct MemoryLowerBound {
  int64_t bytes = 0;           // the largest over devices of resident + working
  ir::Rank rank = 0;           // the device it is on
  int64_t resident_bytes = 0;  // that device's arguments
  int64_t working_bytes = 0;   // the largest forward op's operands and results on it
};

MemoryLowerBound memory_lower_bound(const ir::Module& module, const ir::Function& function);

}  // namespace dstc::htae
