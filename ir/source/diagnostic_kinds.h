// Every diagnostic kind of dstc (diagnostic_kinds.def, one registry with a
// section per stage), as dstc::diag::kName.
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::diag {
#include "ir/source/diagnostic_kinds.def"
}  // namespace dstc::diag
