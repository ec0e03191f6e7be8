// "Did you mean" support shared by every stage's diagnostics.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dstc {

// Edit distance counting insertions, deletions, substitutions and swaps of
// two neighbouring characters (optimal string alignment): `1fb1` is one edit
// from `1f1b`, as a typist sees it.
size_t edit_distance(std::string_view a, std::string_view b);

// `word` in ASCII lower case, for names that ignore case.
std::string lowercase(std::string_view word);

// The candidate `word` most likely misspells: one equal to it but for case,
// else the nearest within a third of its length in edits (at least 1, at
// most 3), else the only candidate that abbreviates it or that it
// abbreviates (`attn`, `attention`). Nullopt when none is that close, or
// when `word` is a candidate.
std::optional<std::string> closest_spelling(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace dstc
