// The diagnostic kinds `dstc search` reports (search_diagnostic_kinds.def).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::search::diag {
#include "compiler/driver/search_diagnostic_kinds.def"
}  // namespace dstc::search::diag
