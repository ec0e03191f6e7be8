// The pointwise activations' table (pointwise_ops.def), with their scalar
// semantics (pointwise_semantics.h) on doubles.
#include "ir/pointwise_ops.h"

#include <array>

#include "ir/pointwise_semantics.h"

namespace dstc::ir {
namespace {

constexpr std::array kPointwise = {
#define DSTC_POINTWISE(kind, name, grad, grad_name, flops, grad_flops, reads, semantics, summary) \
  PointwiseOp{OpKind::kind,                                                                       \
              OpKind::grad,                                                                       \
              flops,                                                                              \
              grad_flops,                                                                         \
              GradReads::reads,                                                                   \
              pointwise::semantics##_forward<double>,                                             \
              pointwise::semantics##_backward<double>,                                            \
              summary},
#include "ir/pointwise_ops.def"
#undef DSTC_POINTWISE
};

}  // namespace

std::span<const PointwiseOp> pointwise_ops() { return kPointwise; }

const PointwiseOp* find_pointwise(OpKind kind) {
  for (const PointwiseOp& p : kPointwise) {
    if (p.kind == kind || p.grad == kind) return &p;
  }
  return nullptr;
}

}  // namespace dstc::ir
