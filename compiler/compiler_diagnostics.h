// The diagnostic kinds of the compiler's middle end (compiler_diagnostic_kinds.def).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::compiler::diag {
#include "compiler/compiler_diagnostic_kinds.def"
}  // namespace dstc::compiler::diag
