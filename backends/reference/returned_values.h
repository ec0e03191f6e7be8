// What a training step's returned values are: a loss, or the next step's
// value of one of its arguments (an updated weight, master copy or
// optimizer state). verify names them; a runtime feeds the updates back
// as the next step's arguments.
#pragma once

#include <optional>
#include <vector>

#include "ir/module.h"

namespace dstc::reference {

// Follows single-operand ops (boxing, casts) back from a value to an
// optimizer op's result or an argument.
struct ValueSource {
  const ir::Op* optimizer = nullptr;
  int result = 0;
  ir::ValueId arg = ir::kNone;
  std::optional<ir::DType> cast;  // the last cast on the way: a lower-precision copy
};
ValueSource trace_source(const ir::Module& m, const ir::Function& f, ir::ValueId v);

// Per returned value (in f.returns order), the argument it replaces in the
// next step, or kNone for a loss (trace_source finds no optimizer) or an
// update no argument takes. An optimizer's result k updates the
// argument its operand holds (Adam: w, m, v are operands 0, 2, 3); a copy
// cast from an updated master replaces the parameter the master is of.
std::vector<ir::ValueId> next_step_arguments(const ir::Module& m, const ir::Function& f);

}  // namespace dstc::reference
