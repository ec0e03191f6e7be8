// The reference executor's kernel for each IR compute and optimizer op. An
// op's binding sits beside its kernel, in the kernels_<family>.cpp file that
// holds it: it reads the op's attributes and where the device's shard sits
// (op_context.h), and calls the kernel. A new op's reference kernel is its
// kernel and one `bind` line there; kernel_table_test checks every compute
// and optimizer op of the IR has one.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "backends/reference/compute_ops.h"
#include "backends/reference/host_tensor.h"
#include "ir/registry.h"

namespace dstc::reference {

// One op on one device: its attributes, operands and results (`out`, shaped
// by the op's result types and zero-filled).
struct KernelCall {
  const DeviceContext& ctx;
  const ir::AttrReader& attrs;
  std::span<const HostTensor* const> in;
  std::span<HostTensor> out;
  // Set when the op fails on its values (a label outside the classes).
  std::string& error;

  const HostTensor& x(size_t i) const { return *in[i]; }
  HostTensor& y() const { return out[0]; }
  // The integer attribute `name` (a dim, negative from the end) as an index
  // into operand i's dims.
  int dim(size_t operand = 0, std::string_view name = "dim") const;
};

using KernelBinding = void (*)(const KernelCall&);

class KernelTable {
 public:
  // Throws std::logic_error when `kind` is bound twice.
  void bind(ir::OpKind kind, KernelBinding binding);
  // nullptr when the reference has no kernel for `kind`.
  KernelBinding find(ir::OpKind kind) const { return bindings_[static_cast<size_t>(kind)]; }

 private:
  std::array<KernelBinding, ir::kOpKindCount> bindings_{};
};

// Every family's bindings, built once.
const KernelTable& kernel_table();

// Each kernels_<family>.cpp binds its ops.
void bind_forward_kernels(KernelTable& table);
void bind_backward_kernels(KernelTable& table);
void bind_shape_kernels(KernelTable& table);
void bind_conv_kernels(KernelTable& table);
void bind_routing_kernels(KernelTable& table);
void bind_optimizer_kernels(KernelTable& table);

}  // namespace dstc::reference
