// Compiling a test model, with the checks every compiler test wants: the
// strategy compiles (its diagnostics printed otherwise) and the IR verifies
// (well formed and free of deadlocks).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "compiler/compile_strategy.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace dstc::compiler::testing {

struct Compiled {
  SourceManager sources;
  std::unique_ptr<DiagnosticEngine> diags;
  std::optional<CompiledStrategy> result;
  const ir::Module& module() const { return result->module; }
  const ir::Function& f() const { return result->module.functions[0]; }
};

inline std::unique_ptr<Compiled> compile(const LogicalGraph& g, const StrategySpec& spec) {
  auto c = std::make_unique<Compiled>();
  c->diags = std::make_unique<DiagnosticEngine>(c->sources);
  c->result = compile_strategy({g, spec}, c->sources, *c->diags);
  std::string text;
  for (const Diagnostic& d : c->diags->diagnostics()) text += c->diags->render(d, false);
  EXPECT_TRUE(c->result.has_value()) << text;
  if (c->result) {
    SourceManager sm;
    DiagnosticEngine verify(sm);
    bool ok = ir::verify_module(c->result->module, verify);
    std::string errors;
    for (const Diagnostic& d : verify.diagnostics()) errors += verify.render(d, false);
    EXPECT_TRUE(ok) << errors << ir::print_module(c->result->module).substr(0, 20000);
  }
  return c;
}

}  // namespace dstc::compiler::testing
