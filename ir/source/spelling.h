// "Did you mean" support shared by every stage's diagnostics.
#pragma once

#include <cstddef>
#include <string_view>

namespace dstc {

// Levenshtein distance: insertions, deletions and substitutions.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace dstc
