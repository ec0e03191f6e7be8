// The diagnostic kinds `dstc verify` reports (verify_diagnostic_kinds.def).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::reference::diag {
#include "backends/reference/verify_diagnostic_kinds.def"
}  // namespace dstc::reference::diag
