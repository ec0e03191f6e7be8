#include "compiler/strategy/expert_load.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"

namespace dstc::compiler {
namespace {

struct Cell {
  std::string_view text;
  SourceRange range;
};

// The comma-separated cells of [begin, end) of the file, blanks trimmed.
std::vector<Cell> cells_of(FileId file, std::string_view text, uint32_t begin, uint32_t end) {
  std::vector<Cell> cells;
  for (uint32_t at = begin; at <= end;) {
    size_t comma = text.find(',', at);
    const uint32_t stop = comma == std::string_view::npos || comma > end ? end : static_cast<uint32_t>(comma);
    uint32_t first = at, last = stop;
    while (first < last && (text[first] == ' ' || text[first] == '\t')) ++first;
    while (last > first && (text[last - 1] == ' ' || text[last - 1] == '\t' || text[last - 1] == '\r')) --last;
    cells.push_back({text.substr(first, last - first), SourceRange{file, first, last}});
    at = stop + 1;
  }
  return cells;
}

}  // namespace

std::optional<std::vector<std::vector<double>>> read_expert_load(FileId file, const std::vector<int64_t>& experts,
                                                                 SourceRange written, DiagnosticEngine& diags) {
  const std::string_view text = diags.sources().file(file).text;
  const size_t errors_before = diags.error_count();
  std::vector<std::vector<double>> rows;
  const size_t layers = experts.size();
  for (uint32_t line = 0; line < text.size();) {
    size_t nl = text.find('\n', line);
    const uint32_t end = nl == std::string_view::npos ? static_cast<uint32_t>(text.size()) : static_cast<uint32_t>(nl);
    std::vector<Cell> cells = cells_of(file, text, line, end);
    const bool blank = cells.size() == 1 && cells[0].text.empty();
    const uint32_t next = end + 1;
    if (blank || cells[0].text.starts_with('#')) {
      line = next;
      continue;
    }
    const SourceRange row_range{file, cells.front().range.begin, cells.back().range.end};
    if (rows.size() == layers) {
      diags.error(diag::kExpertLoad, row_range,
                  fmt::format("row {} is one too many: the model has {} MoE layer{}, one row each (or one row for all)",
                              rows.size() + 1, layers, layers == 1 ? "" : "s"));
      return std::nullopt;
    }
    std::vector<double> counts;
    for (const Cell& c : cells) {
      double v = 0;
      auto [ptr, ec] = std::from_chars(c.text.data(), c.text.data() + c.text.size(), v);
      if (c.text.empty() || ec != std::errc() || ptr != c.text.data() + c.text.size() || !std::isfinite(v) || v < 0) {
        diags.error(diag::kExpertLoad, c.range,
                    fmt::format("'{}' is not a token count: each cell is a number at least 0", c.text));
        continue;
      }
      counts.push_back(v);
    }
    if (diags.error_count() != errors_before) return std::nullopt;
    const size_t layer = rows.size();
    if (static_cast<int64_t>(counts.size()) != experts[layer]) {
      diags.error(diag::kExpertLoad, row_range,
                  fmt::format("row {} has {} count{}, but MoE layer {} has {} experts", layer + 1, counts.size(),
                              counts.size() == 1 ? "" : "s", layer, experts[layer]));
      return std::nullopt;
    }
    double total = 0;
    for (double v : counts) total += v;
    if (total <= 0) {
      diags.error(diag::kExpertLoad, row_range, fmt::format("row {} routes no token: its counts are all 0", layer + 1));
      return std::nullopt;
    }
    rows.push_back(std::move(counts));
    line = next;
  }
  if (rows.size() == 1) {
    for (size_t layer = 1; layer < layers; ++layer) {
      if (experts[layer] != experts[0]) {
        diags.error(diag::kExpertLoad, written,
                    fmt::format("one row stands for every MoE layer, but layer {} has {} experts and layer 0 {}", layer,
                                experts[layer], experts[0]));
        return std::nullopt;
      }
    }
    rows.resize(layers, rows[0]);
  }
  if (rows.size() != layers) {
    diags
        .error(diag::kExpertLoad, written,
               fmt::format("the expert load file has {} row{}, but the model has {} MoE layers: one row each, or "
                           "one row for all",
                           rows.size(), rows.size() == 1 ? "" : "s", layers))
        .note(SourceRange{file, 0, 0}, "the file");
    return std::nullopt;
  }
  return rows;
}

}  // namespace dstc::compiler
