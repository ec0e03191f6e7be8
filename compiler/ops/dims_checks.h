// Checks the output-dims rules share: naming dims in messages, finding and
// unifying them, comparing a written output with the inferred one.
#pragma once

#include "compiler/ops/op_rules.h"

namespace dstc::ops {

// "[b: 8, s: 128]"
std::string dims_text(const std::vector<Dim>& dims);
const Dim* find_dim(const std::vector<Dim>& dims, std::string_view name);
// Sets `error` and returns no dims.
DimsResult fail(OpError& error, std::string message, int input = -1, bool unknown = false);
// Every name shared by two inputs must have one size. Fills `all` with the
// union of dims, first appearance first.
bool unify(const std::vector<std::vector<Dim>>& inputs, std::vector<Dim>& all, OpError& error);
// The written output of an op whose output is inferred must agree with it.
DimsResult check_declared(const std::vector<Dim>& inferred, const std::optional<std::vector<DeclaredDim>>& declared,
                          OpError& error);
bool require_dim(const std::vector<Dim>& dims, const std::string& name, int input, OpError& error);

}  // namespace dstc::ops
