// Elaborating a model declaration with parameter values into a Model
// (compiler/frontend/model.h): every instance created, `repeat` expanded,
// every op's dims checked by the op registry.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/model.h"
#include "compiler/frontend/program.h"
#include "compiler/frontend/value.h"

namespace dstc::frontend {

// A parameter value set from outside the declaration: `-D name=value` on the
// command line (range invalid) or a strategy's `for GPT(layers = 24)`.
struct ParamOverride {
  std::string name;
  Value value;
  SourceRange range;
};

// Parses `name=value` strings (value: integer, float, true/false or a name);
// a malformed one is a bad-define diagnostic.
std::vector<ParamOverride> parse_defines(const std::vector<std::string>& defines, DiagnosticEngine& diags);

// Binds call arguments (positional, then named) and defaults to parameters
// in `out`. Defaults are evaluated in `out`, so a default may use earlier
// parameters (`ffn = 4 * hidden`). `overrides` with a matching name replace
// the argument or default. Reports arity and type errors at `call`.
bool bind_params(const std::vector<ParamDecl>& params, const std::vector<Arg>& args, const Scope& caller,
                 const std::vector<ParamOverride>& overrides, Evaluator& eval, Scope& out, SourceRange call,
                 std::string_view callee);

// Elaborates `model` (a DeclKind::Model declaration). Returns nullopt when
// it has errors, which are reported to `diags`.
std::optional<Model> elaborate_model(const Program& program, const DeclRef& model,
                                     const std::vector<ParamOverride>& overrides, DiagnosticEngine& diags);

}  // namespace dstc::frontend
