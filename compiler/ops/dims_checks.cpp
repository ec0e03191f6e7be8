#include "compiler/ops/dims_checks.h"

#include <fmt/format.h>

namespace dstc::ops {

std::string dims_text(const std::vector<Dim>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += fmt::format("{}{}: {}", i ? ", " : "", dims[i].name, dims[i].size);
  return out + "]";
}

const Dim* find_dim(const std::vector<Dim>& dims, std::string_view name) {
  for (const Dim& d : dims) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

DimsResult fail(OpError& error, std::string message, int input, bool unknown) {
  error = {std::move(message), input, unknown};
  return std::nullopt;
}

bool unify(const std::vector<std::vector<Dim>>& inputs, std::vector<Dim>& all, OpError& error) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const Dim& d : inputs[i]) {
      if (const Dim* seen = find_dim(all, d.name)) {
        if (seen->size != d.size) {
          error = {fmt::format("dim {} has size {} here but {} in an earlier input", d.name, d.size, seen->size),
                   static_cast<int>(i), false};
          return false;
        }
      } else {
        all.push_back(d);
      }
    }
  }
  return true;
}

DimsResult check_declared(const std::vector<Dim>& inferred, const std::optional<std::vector<DeclaredDim>>& declared,
                          OpError& error) {
  if (!declared) return inferred;
  if (declared->size() != inferred.size()) {
    return fail(error, fmt::format("the output has {} dims {}, written with {}", inferred.size(), dims_text(inferred),
                                   declared->size()));
  }
  for (size_t i = 0; i < inferred.size(); ++i) {
    const DeclaredDim& d = (*declared)[i];
    if (d.name != inferred[i].name) {
      return fail(error, fmt::format("output dim {} is {}, written as {} (output {})", i, inferred[i].name, d.name,
                                     dims_text(inferred)));
    }
    if (d.size && *d.size != inferred[i].size) {
      return fail(error, fmt::format("output dim {} has size {}, written as {}", d.name, inferred[i].size, *d.size));
    }
  }
  return inferred;
}

bool require_dim(const std::vector<Dim>& dims, const std::string& name, int input, OpError& error) {
  if (find_dim(dims, name)) return true;
  error = {fmt::format("dim {} is not a dim of {}", name, dims_text(dims)), input, true};
  return false;
}

}  // namespace dstc::ops
