#include "backends/reference/compute_ops.h"

#include <fmt/format.h>

#include "backends/reference/kernel_table.h"

namespace dstc::reference {

std::string run_compute(const DeviceContext& ctx, std::span<const HostTensor* const> in, std::span<HostTensor> out) {
  KernelBinding binding = kernel_table().find(ctx.op.kind);
  if (!binding) return fmt::format("{} is not a compute op", ir::op_name(ctx.op.kind));
  ir::AttrReader attrs(ctx.module, ctx.function, ctx.op);
  std::string error;
  binding({ctx, attrs, in, out, error});
  return error;
}

}  // namespace dstc::reference
