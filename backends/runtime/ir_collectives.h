// One rank's share of an IR collective (docs/ir.md, "Communication"),
// carried out with the communicator's contiguous collectives, as NCCL-based
// runtimes do: a collective along a dim packs its blocks contiguously
// first (reduce-scatter, all-to-all) or places the gathered blocks after
// (all-gather). Rooted collectives are their all-member forms, with the
// values the IR leaves unspecified on other members set to NaN as the
// reference executor does (backends/reference/collectives.h).
#pragma once

#include <string>

#include "backends/reference/host_tensor.h"
#include "backends/runtime/communicator.h"
#include "ir/module.h"
#include "ir/projection.h"

namespace dstc::runtime {

// `in` is this rank's operand; `out` is shaped by the result's type.
void run_collective(const ir::Module& module, const ir::Function& f, const ir::Op& op, const ir::RankOp& on_rank,
                    const reference::HostTensor& in, reference::HostTensor& out, Communicator& comm);

}  // namespace dstc::runtime
