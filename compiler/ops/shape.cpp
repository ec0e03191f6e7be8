// Shape ops: concat along a dim, select one index of a dim, reshape.
#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"

namespace dstc::ops {

DimsResult concat_dims(const DimsQuery& q, OpError& error) {
  const auto& inputs = q.inputs;
  const std::string& dim = q.attrs.dim("dim");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!require_dim(inputs[i], dim, static_cast<int>(i), error)) return std::nullopt;
  }
  std::vector<Dim> out = inputs[0];
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].size() != out.size())
      return fail(error, "inputs of concat must have the same dims", static_cast<int>(i));
    for (size_t j = 0; j < out.size(); ++j) {
      if (inputs[i][j].name != out[j].name || (out[j].name != dim && inputs[i][j].size != out[j].size)) {
        return fail(error,
                    fmt::format("inputs of concat must agree on every dim but {}: {} vs {}", dim, dims_text(inputs[0]),
                                dims_text(inputs[i])),
                    static_cast<int>(i));
      }
      if (out[j].name == dim) {
        if (__builtin_add_overflow(out[j].size, inputs[i][j].size, &out[j].size)) {
          return fail(error, "concatenated size overflows");
        }
      }
    }
  }
  return check_declared(out, q.declared, error);
}

DimsResult select_dims(const DimsQuery& q, OpError& error) {
  const std::string& dim = q.attrs.dim("dim");
  const int64_t index = q.attrs.integer("index");
  if (!require_dim(q.inputs[0], dim, 0, error)) return std::nullopt;
  std::vector<Dim> out;
  for (const Dim& d : q.inputs[0]) {
    if (d.name != dim) {
      out.push_back(d);
    } else if (index < 0 || index >= d.size) {
      return fail(error, fmt::format("index {} is outside dim {} of size {}", index, d.name, d.size));
    }
  }
  return check_declared(out, q.declared, error);
}

DimsResult slice_dims(const DimsQuery& q, OpError& error) {
  const std::string& dim = q.attrs.dim("dim");
  const int64_t start = q.attrs.integer("start"), end = q.attrs.integer("end");
  if (!require_dim(q.inputs[0], dim, 0, error)) return std::nullopt;
  std::vector<Dim> out = q.inputs[0];
  for (Dim& d : out) {
    if (d.name != dim) continue;
    if (start < 0 || end > d.size || start >= end)
      return fail(error, fmt::format("{}..{} is not a range within dim {} of size {}", start, end, d.name, d.size));
    d.size = end - start;
  }
  return check_declared(out, q.declared, error);
}

DimsResult reshape_dims(const DimsQuery& q, OpError& error) {
  // Element counts compared in long double: exact for counts below 2^64.
  std::vector<Dim> out;
  long double in_elems = 1, out_elems = 1;
  for (const Dim& d : q.inputs[0]) in_elems *= static_cast<long double>(d.size);
  for (const DeclaredDim& d : *q.declared) {
    std::optional<int64_t> size = d.size;
    if (!size) {
      if (const Dim* in = find_dim(q.inputs[0], d.name)) size = in->size;
    }
    if (!size) return fail(error, fmt::format("output dim {} is new: give its size ({}: N)", d.name, d.name), -1, true);
    out.push_back({d.name, *size});
    out_elems *= static_cast<long double>(*size);
  }
  if (in_elems != out_elems) {
    return fail(error, fmt::format("reshape must keep the number of elements: {} vs {}", dims_text(q.inputs[0]),
                                   dims_text(out)));
  }
  return out;
}

// The batch dim is sized by the global batch and cut by micro-batches.
LoweringRefusal slice_limit(const LoweringQuery& q) {
  if (q.axis >= 0 && q.inputs[0][static_cast<size_t>(q.axis)] == q.batch_dim)
    return fmt::format("a range of the batch dim {}", q.batch_dim);
  return std::nullopt;
}

}  // namespace dstc::ops
