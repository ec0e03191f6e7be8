// The diagnostic kinds of the simulator's input files (see htae_diagnostic_kinds.def).
#pragma once

#include "ir/source/diagnostics.h"

namespace dstc::htae::diag {
#include "htae/htae_diagnostic_kinds.def"
}  // namespace dstc::htae::diag
