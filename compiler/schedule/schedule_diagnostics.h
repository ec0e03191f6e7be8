// The diagnostic kinds of pipeline schedules (schedule_diagnostic_kinds.def).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::diag {
#include "compiler/schedule/schedule_diagnostic_kinds.def"
}  // namespace dstc::diag
