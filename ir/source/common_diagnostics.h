// The diagnostic kinds every stage may report (see diagnostic_kinds.def).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::diag {
#include "ir/source/diagnostic_kinds.def"
}  // namespace dstc::diag
