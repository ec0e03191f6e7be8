// Parsing one .dstrat file into its AST (compiler/frontend/ast.h).
//
// ANTLR parses in two stages: SLL prediction with a bail-out error strategy
// (fast, correct for all valid input), then, only when that fails, full LL
// with an error listener that turns each syntax error into a diagnostic.
// Before parsing, the text is checked for valid UTF-8, unterminated strings
// and comments, and bracket nesting deeper than kMaxNesting (ANTLR's
// recursive descent would otherwise exhaust the stack).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/ast.h"
#include "ir/source/diagnostics.h"

namespace dstc::frontend {

// Deepest bracket nesting and expression depth accepted.
inline constexpr int kMaxNesting = 100;
inline constexpr int kMaxExprDepth = 400;

// The grammar's keywords: its literal tokens that are words ("layer",
// "1f1b", ...), from the generated lexer (the same list as Dstrat.tokens).
std::vector<std::string> grammar_keywords();

// The AST of a file, or nullopt when it has errors (reported to `diags`).
std::optional<FileAst> parse_file(FileId file, DiagnosticEngine& diags);

}  // namespace dstc::frontend
