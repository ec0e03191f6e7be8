// The data-dependency graph of a function (operand edges and send -> recv
// edges), its graph algorithms (Boost.Graph) and export to Graphviz DOT.
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"

namespace dstc::ir {

// Ops in an order where every op follows those it depends on.
std::vector<OpId> topological_order(const Module& module, const Function& f);

struct CriticalPath {
  std::vector<OpId> ops;  // first to last
  double flops = 0;       // sum of the ops' per-device FLOPs
};

// The dependency chain with the most FLOPs (per device, from the registry).
CriticalPath critical_path(const Module& module, const Function& f);

// One digraph; a cluster per function; critical-path ops drawn bold red.
std::string export_dot(const Module& module);

}  // namespace dstc::ir
