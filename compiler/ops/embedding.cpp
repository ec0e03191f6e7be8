// Embedding: rows of a table[v, h] picked by integer ids[...] give [..., h].
#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult embedding_dims(const DimsQuery& q, OpError& error) {
  const auto& inputs = q.inputs;
  if (inputs[0].size() != 2) {
    return fail(error, fmt::format("the table must have 2 dims [rows, width], not {}", dims_text(inputs[0])), 0);
  }
  std::vector<Dim> out = inputs[1];
  if (find_dim(out, inputs[0][1].name)) {
    return fail(error, fmt::format("the ids already have a dim named {}", inputs[0][1].name), 1);
  }
  out.push_back(inputs[0][1]);
  return check_declared(out, q.declared, error);
}

}  // namespace dstc::ops
