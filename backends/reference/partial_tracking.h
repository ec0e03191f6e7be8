// Which mesh axes each value is partial on, inferred op by op from the
// arguments' layouts, independently of the layouts the compiler declared on
// the results. A value partial on an axis holds a summand of the logical
// value; an op may read it only where it is linear in that operand. The
// executor compares the inferred partial axes with the declared layout of
// every result, so a missing all-reduce or a partial sum read as a value is
// reported at the op that does it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/module.h"

namespace dstc::reference {

struct PartialAxes {
  uint32_t sum = 0;  // bit a: partial (sum) on mesh axis a
  uint32_t max = 0;  // bit a: partial (max) on mesh axis a
  uint32_t any() const { return sum | max; }
  friend bool operator==(const PartialAxes&, const PartialAxes&) = default;
};

// Mesh axes (bits) on which a device set has more than one coordinate.
uint32_t spanned_axes(const ir::Module& module, ir::DeviceSetId set);

// The partial axes a value's declared layout states (spanned axes only).
PartialAxes declared_partial(const ir::Module& module, const ir::Function& f, ir::ValueId v);

struct PartialInference {
  std::vector<PartialAxes> results;  // per result
  std::vector<bool> checked;         // per result: whether its declared layout is compared
  std::string error;                 // non-empty: the op reads a partial operand it may not
};

// The partial axes of an op's results from its operands' inferred ones.
PartialInference infer_partial(const ir::Module& module, const ir::Function& f, const ir::Op& op,
                               std::span<const PartialAxes> operands);

// "tp" or "dp, tp": the names of the mesh axes in a mask.
std::string axis_names(const ir::Mesh& mesh, uint32_t axes);

}  // namespace dstc::reference
