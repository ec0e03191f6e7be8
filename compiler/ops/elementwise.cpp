// Elementwise ops: binary ones broadcast by dim name, unary ones keep their
// input's dims.
#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult broadcast_dims(const DimsQuery& q, OpError& error) {
  const auto& inputs = q.inputs;
  std::vector<Dim> all;
  if (!unify(inputs, all, error)) return std::nullopt;
  // Broadcasting adds no dims: each input's dims come from the largest one
  // (a bias [o] onto [b, s, o]), so [b, s, h] + [b, s, o] is a naming slip.
  size_t largest = 0;
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].size() > inputs[largest].size()) largest = i;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Dim& d : inputs[i]) {
      if (!find_dim(inputs[largest], d.name)) {
        return fail(error,
                    fmt::format("dims {} and {} do not broadcast: dim {} is not in {}; rename it, e.g. x[..., {}]",
                                dims_text(inputs[i]), dims_text(inputs[largest]), d.name, dims_text(inputs[largest]),
                                inputs[largest].empty() ? d.name : inputs[largest].back().name),
                    static_cast<int>(i));
      }
    }
  }
  if (!q.declared) return all;
  // The written output may order the dims differently; it must have them all.
  std::vector<Dim> out;
  for (const DeclaredDim& d : *q.declared) {
    const Dim* in = find_dim(all, d.name);
    if (!in) return fail(error, fmt::format("output dim {} appears in no input", d.name), -1, true);
    out.push_back(*in);
  }
  if (out.size() != all.size()) {
    return fail(error, fmt::format("the output must have every input dim: {}", dims_text(all)));
  }
  return out;
}

DimsResult same_dims(const DimsQuery& q, OpError& error) { return check_declared(q.inputs[0], q.declared, error); }

}  // namespace dstc::ops
