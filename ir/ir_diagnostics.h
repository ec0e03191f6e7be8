// The diagnostic kinds the IR reports (see ir_diagnostic_kinds.def).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::diag {
#include "ir/ir_diagnostic_kinds.def"
}  // namespace dstc::diag
