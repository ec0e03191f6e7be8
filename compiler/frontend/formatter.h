// The canonical layout of a .dstrat file (`dstc fmt`): one statement per
// line, two-space indents, one blank line between declarations, blank lines
// inside bodies kept (at most one), minimal parentheses, comments kept
// (a comment that ended a line still ends that statement's line; others go
// on their own line before the next statement). Formatting is idempotent and
// does not change the AST (ast.h `same`).
#pragma once

#include <string>

#include "compiler/frontend/ast.h"
#include "ir/source/source_manager.h"

namespace dstc::frontend {

std::string format_file(const FileAst& ast, const SourceManager& sources);

}  // namespace dstc::frontend
