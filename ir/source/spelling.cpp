#include "ir/source/spelling.h"

#include <algorithm>
#include <cctype>

namespace dstc {

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rows: a swap looks two rows back.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

std::string lowercase(std::string_view word) {
  std::string out(word);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

namespace {

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// `short_form` keeps the first letter of `word` and its other letters in
// order, and is at least three letters and shorter.
bool abbreviates(std::string_view short_form, std::string_view word) {
  if (short_form.size() < 3 || short_form.size() >= word.size() || short_form[0] != word[0]) return false;
  size_t at = 0;
  for (char c : word) {
    if (at < short_form.size() && c == short_form[at]) ++at;
  }
  return at == short_form.size();
}

}  // namespace

std::optional<std::string> closest_spelling(std::string_view word, const std::vector<std::string>& candidates) {
  if (std::find(candidates.begin(), candidates.end(), word) != candidates.end()) return std::nullopt;
  for (const std::string& c : candidates) {
    if (equal_ignoring_case(word, c)) return c;
  }
  size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  const std::string* best = nullptr;
  size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) best = &c, best_distance = d;
  }
  if (best) return *best;
  // Else the one candidate that abbreviates the word, or that it
  // abbreviates (`attn` for `attention`).
  const std::string* abbreviation = nullptr;
  for (const std::string& c : candidates) {
    if (!abbreviates(c, word) && !abbreviates(word, c)) continue;
    if (abbreviation) return std::nullopt;
    abbreviation = &c;
  }
  if (!abbreviation) return std::nullopt;
  return *abbreviation;
}

}  // namespace dstc
