// Reductions: sum, mean and max take a dim away.
#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult reduced_dims(const DimsQuery& q, OpError& error) {
  const std::string& dim = q.attrs.dim("dim");
  if (!require_dim(q.inputs[0], dim, 0, error)) return std::nullopt;
  std::vector<Dim> out;
  for (const Dim& d : q.inputs[0]) {
    if (d.name != dim) out.push_back(d);
  }
  return check_declared(out, q.declared, error);
}

}  // namespace dstc::ops
