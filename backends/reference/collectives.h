// Collectives carried out exactly over one group: inputs and outputs are the
// members' local tensors in group order (docs/ir.md, "Communication").
#pragma once

#include <span>
#include <string>

#include "backends/reference/host_tensor.h"
#include "ir/module.h"

namespace dstc::reference {

// `outputs` are shaped by the op's result type and zero-filled. Members a
// rooted reduce or gather leaves unspecified get NaNs, so any use shows.
// Returns an error message, empty on success.
std::string run_collective(const ir::Module& module, const ir::Function& f, const ir::Op& op,
                           std::span<const HostTensor* const> inputs, std::span<HostTensor> outputs);

}  // namespace dstc::reference
