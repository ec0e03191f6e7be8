// The diagnostic kinds of the .dstrat front end (see the .def file).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::frontend::diag {
#include "compiler/frontend/frontend_diagnostic_kinds.def"
}  // namespace dstc::frontend::diag
