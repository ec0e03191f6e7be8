// Contractions: matmul and einsum. The written output names the kept dims;
// every other dim of the inputs is summed.
#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult contraction_dims(const DimsQuery& q, OpError& error) {
  std::vector<Dim> all;
  if (!unify(q.inputs, all, error)) return std::nullopt;
  std::vector<Dim> out;
  for (const DeclaredDim& d : *q.declared) {
    const Dim* in = find_dim(all, d.name);
    if (!in) return fail(error, fmt::format("output dim {} appears in no input", d.name), -1, true);
    if (d.size && *d.size != in->size) {
      return fail(error,
                  fmt::format("output dim {} has size {} in the inputs, written as {}", d.name, in->size, *d.size));
    }
    if (find_dim(out, d.name)) return fail(error, fmt::format("output dim {} is written twice", d.name));
    out.push_back(*in);
  }
  return out;
}

}  // namespace dstc::ops
