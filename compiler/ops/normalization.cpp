// Normalisations: softmax and log-softmax along a dim; layer, RMS and batch
// norm over a dim, with scale and shift over dims of the input.
#include <cmath>

#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult along_dim_dims(const DimsQuery& q, OpError& error) {
  if (!require_dim(q.inputs[0], q.attrs.dim("dim"), 0, error)) return std::nullopt;
  if (!q.attrs.declares("z_loss")) return check_declared(q.inputs[0], q.declared, error);  // log_softmax
  if (double z = q.attrs.real("z_loss"); !(z >= 0 && std::isfinite(z)))
    return fail(error, fmt::format("z_loss is a router z-loss's coefficient, at least 0, not {}", z));
  return check_declared(q.inputs[0], q.declared, error);
}

DimsResult normalized_dims(const DimsQuery& q, OpError& error) {
  const auto& inputs = q.inputs;
  if (!require_dim(inputs[0], q.attrs.dim("dim"), 0, error)) return std::nullopt;
  std::vector<Dim> all;
  if (!unify(inputs, all, error)) return std::nullopt;
  for (size_t i = 1; i < inputs.size(); ++i) {
    for (const Dim& d : inputs[i]) {
      if (!require_dim(inputs[0], d.name, static_cast<int>(i), error)) return std::nullopt;
    }
  }
  return check_declared(inputs[0], q.declared, error);
}

LoweringRefusal layernorm_limit(const LoweringQuery& q) {
  if (q.axis != static_cast<int>(q.rank()) - 1) return "layernorm must normalize the last dim";
  if (q.inputs.size() != 3) return "layernorm needs gamma and beta";
  return std::nullopt;
}

LoweringRefusal rmsnorm_limit(const LoweringQuery& q) {
  if (q.axis != static_cast<int>(q.rank()) - 1) return "rmsnorm must normalize the last dim";
  if (q.inputs.size() == 2 && q.inputs[1] != std::vector<std::string>{q.inputs[0].back()})
    return "rmsnorm's scale must have exactly the normalized dim";
  return std::nullopt;
}

LoweringRefusal batchnorm_limit(const LoweringQuery& q) {
  if (q.rank() < 2 || q.axis != 1) return "batchnorm takes its input as [batch, channels, ...] with dim = the channels";
  if (q.inputs.size() != 3) return "batchnorm needs gamma and beta";
  for (size_t i = 1; i < 3; ++i) {
    if (q.inputs[i] != std::vector<std::string>{q.inputs[0][1]})
      return "batchnorm's gamma and beta must have exactly the channel dim";
  }
  return std::nullopt;
}

}  // namespace dstc::ops
