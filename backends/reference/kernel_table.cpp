#include "backends/reference/kernel_table.h"

#include <fmt/format.h>

#include <stdexcept>

#include "backends/reference/op_context.h"

namespace dstc::reference {

int KernelCall::dim(size_t operand, std::string_view name) const {
  return normalized(attrs.integer(name), x(operand).rank());
}

void KernelTable::bind(ir::OpKind kind, KernelBinding binding) {
  KernelBinding& slot = bindings_[static_cast<size_t>(kind)];
  if (slot) throw std::logic_error(fmt::format("reference kernel for {} bound twice", ir::op_name(kind)));
  slot = binding;
}

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t;
    bind_forward_kernels(t);
    bind_backward_kernels(t);
    bind_shape_kernels(t);
    bind_conv_kernels(t);
    bind_routing_kernels(t);
    bind_optimizer_kernels(t);
    return t;
  }();
  return table;
}

}  // namespace dstc::reference
