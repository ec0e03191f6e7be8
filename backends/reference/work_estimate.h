// What running a program on the reference executor costs, known before it
// runs: the work of each op (so progress can be reported as a share of the
// whole, not of the op count, which is dominated by small ops) and the
// memory it holds (the executor keeps every value of every rank until the
// comparison, each element as a double).
#pragma once

#include <vector>

#include "ir/module.h"

namespace dstc::reference {

struct ProgramWork {
  // Per op, in element operations: the op's floating-point operations plus
  // the elements it reads and writes, on every rank that runs it.
  std::vector<double> per_op;
  double total = 0;
  // Bytes of every value on every rank that holds it, as the executor
  // stores them (8 per element).
  double bytes = 0;
};

ProgramWork estimate_work(const ir::Module& module, const ir::Function& function);

}  // namespace dstc::reference
