// `train { expert_load = "file.csv" }`: a measured routing histogram, how
// many tokens each expert of each MoE layer received, which prices the
// experts' GEMMs and slots in place of the models' Zipf skew.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/source/diagnostics.h"

namespace dstc::compiler {

// The file's rows of counts, one per MoE layer in model order, or one row
// for every layer; `experts[i]` is MoE layer i's expert count. nullopt with
// diagnostics when a row is missing, extra, of the wrong length, or holds
// something other than counts (at least 0, not all 0).
std::optional<std::vector<std::vector<double>>> read_expert_load(FileId file, const std::vector<int64_t>& experts,
                                                                 SourceRange written, DiagnosticEngine& diags);

}  // namespace dstc::compiler
