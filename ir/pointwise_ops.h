// The pointwise activations (pointwise_ops.def): for each, its IR kind and
// gradient kind, its cost per element and its scalar semantics, which the
// reference executor applies element by element.
#pragma once

#include <span>
#include <string_view>

#include "ir/ids.h"

namespace dstc::ir {

enum class GradReads : uint8_t { Input, Output };

struct PointwiseOp {
  OpKind kind;
  OpKind grad;
  double flops;       // per element, forward
  double grad_flops;  // per element, the grad op
  GradReads grad_reads;
  double (*forward)(double x);
  double (*backward)(double dy, double v);  // v: x or y, as grad_reads says
  std::string_view summary;
};

std::span<const PointwiseOp> pointwise_ops();
// The activation whose forward or grad op `kind` is; nullptr for other ops.
const PointwiseOp* find_pointwise(OpKind kind);

}  // namespace dstc::ir
