// Elementwise ops: binary ones broadcast by dim name, unary ones keep their
// input's dims.
#include <algorithm>

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
  // The result has the largest operand's dims in its order, whichever
  // operand that is (a bias [h] minus x [b, h] is [b, h]).
  if (!q.declared) return inputs[largest];
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

// Positions run along `dim`; the last dim, of even size, is rotated in pairs.
DimsResult rope_dims(const DimsQuery& q, OpError& error) {
  const std::vector<Dim>& x = q.inputs[0];
  const std::string& positions = q.attrs.dim("dim");
  if (!require_dim(x, positions, 0, error)) return std::nullopt;
  if (x.back().name == positions)
    return fail(error,
                fmt::format("the last dim ({}) is the one rotated; positions must run along another", positions));
  if (double base = q.attrs.real("base"); !(base > 0))
    return fail(error, fmt::format("the frequency base must be positive, not {}", base));
  if (x.back().size % 2 != 0)
    return fail(error,
                fmt::format("the last dim is rotated in pairs, but {} = {} is odd", x.back().name, x.back().size));
  return check_declared(x, q.declared, error);
}

// The lowering takes two operands, one broadcast over the other's other
// dims: its dims must be the other's, in the same order.
LoweringRefusal binary_limit(const LoweringQuery& q) {
  if (q.inputs.size() != 2) return fmt::format("{} takes exactly two operands here; nest it for more", q.op);
  const size_t full = q.inputs[1].size() > q.inputs[0].size() ? 1 : 0;
  const std::vector<std::string>& a = q.inputs[full];
  const char* const out_of_order = "one operand's dims must be dims of the other, in the same order";
  auto next = a.begin();
  for (const std::string& d : q.inputs[1 - full]) {
    next = std::find(next, a.end(), d);
    if (next == a.end()) return out_of_order;
    ++next;
  }
  if (q.output != a) return out_of_order;
  return std::nullopt;
}

// Micro-batches cut the batch: positions along it would restart.
LoweringRefusal rope_limit(const LoweringQuery& q) {
  if (q.axis >= 0 && q.inputs[0][static_cast<size_t>(q.axis)] == q.batch_dim)
    return fmt::format("positions along the batch dim {}", q.batch_dim);
  return std::nullopt;
}

}  // namespace dstc::ops
