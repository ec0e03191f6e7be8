// Runs one compute or optimizer op on one device: its binding in the kernel
// table (kernel_table.h) reads the op's attributes and calls its kernel.
#pragma once

#include <span>
#include <string>

#include "backends/reference/host_tensor.h"
#include "ir/module.h"

namespace dstc::reference {

struct DeviceContext {
  const ir::Module& module;
  const ir::Function& function;
  const ir::Op& op;
  ir::Rank rank = 0;
  // Micro-batches of the step: a dropout mask is drawn over the whole step's
  // batch, micro-batch k holding rows [k·b, (k+1)·b) of dim 0.
  int32_t micro_batches = 1;
  // Optimizer steps taken before this one: Adam's bias correction counts
  // from the step the program was compiled for (its `step` attribute).
  int64_t steps_before = 0;
};

// `out` are shaped by the op's result types and zero-filled. Returns an
// error message, empty on success.
std::string run_compute(const DeviceContext& ctx, std::span<const HostTensor* const> in, std::span<HostTensor> out);

}  // namespace dstc::reference
