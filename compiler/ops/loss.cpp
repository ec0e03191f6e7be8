// Losses: scalars from predictions and targets.
#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult cross_entropy_dims(const DimsQuery& q, OpError& error) {
  const auto& inputs = q.inputs;
  const std::string& dim = q.attrs.dim("dim");
  if (!require_dim(inputs[0], dim, 0, error)) return std::nullopt;
  std::vector<Dim> rest;
  for (const Dim& d : inputs[0]) {
    if (d.name != dim) rest.push_back(d);
  }
  if (rest != inputs[1]) {
    return fail(error,
                fmt::format("the labels must have the logits' dims without {}: {}, not {}", dim, dims_text(rest),
                            dims_text(inputs[1])),
                1);
  }
  return check_declared({}, q.declared, error);
}

DimsResult mse_loss_dims(const DimsQuery& q, OpError& error) {
  if (q.inputs[0] != q.inputs[1]) {
    return fail(error,
                fmt::format("prediction {} and target {} differ", dims_text(q.inputs[0]), dims_text(q.inputs[1])), 1);
  }
  return check_declared({}, q.declared, error);
}

LoweringRefusal cross_entropy_limit(const LoweringQuery& q) {
  if (q.axis != static_cast<int>(q.rank()) - 1) return "the class dim must be the last dim of the logits";
  return std::nullopt;
}

}  // namespace dstc::ops
