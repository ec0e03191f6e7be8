#include "compiler/schedule/schedule_csv.h"

#include <array>

#include <fmt/format.h>

#include "compiler/schedule/schedule_generators.h"
#include "ir/source/diagnostic_kinds.h"

namespace dstc::schedule {
namespace {

bool is_communication_action(std::string_view cell) {
  static constexpr std::array kNames = {"SEND_F", "RECV_F", "SEND_B", "RECV_B", "UNSHARD", "RESHARD"};
  size_t letter = cell.find_first_not_of("0123456789");
  if (letter == 0 || letter == std::string_view::npos) return false;
  std::string_view rest = cell.substr(letter);
  for (std::string_view name : kNames) {
    if (rest.starts_with(name) && rest.substr(name.size()).find_first_not_of("0123456789") == std::string_view::npos)
      return true;
  }
  return false;
}

std::string_view trim(std::string_view s, uint32_t& offset) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
    ++offset;
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// A table's stage runs on the rank whose row lists it first, as PyTorch's
// pipelining runtime places the stages a rank's row names: any placement,
// round-robin, a V or other. A stage listed on a later row too is reported
// by the check; a stage no row lists stays where round-robin puts it (its
// missing actions are reported by the check).
void place_stages(ScheduleTable& table) {
  table.stage_ranks.assign(static_cast<size_t>(table.num_stages), -1);
  for (int32_t r = 0; r < table.num_ranks; ++r)
    for (const Action& a : table.ranks[r])
      if (a.stage >= 0 && a.stage < table.num_stages && table.stage_ranks[a.stage] < 0) table.stage_ranks[a.stage] = r;
  for (int32_t s = 0; s < table.num_stages; ++s)
    if (table.stage_ranks[s] < 0) table.stage_ranks[s] = s % table.num_ranks;
}

}  // namespace

std::optional<ScheduleTable> read_schedule_csv(FileId file, const PipelineDims& dims, DiagnosticEngine& diags) {
  const SourceFile& src = diags.sources().file(file);
  const std::string& text = src.text;
  ScheduleTable table;
  table.num_ranks = dims.ranks;
  table.num_stages = dims.ranks * dims.virtual_stages;
  table.num_micro_batches = dims.micro_batches;
  size_t errors_before = diags.error_count();

  uint32_t line_begin = 0;
  uint32_t last_row_begin = 0;
  int64_t actions = 0;
  while (line_begin < text.size() && !diags.at_error_limit()) {
    size_t nl = text.find('\n', line_begin);
    uint32_t line_end = nl == std::string::npos ? static_cast<uint32_t>(text.size()) : static_cast<uint32_t>(nl);
    uint32_t offset = line_begin;
    std::string_view line = trim(std::string_view(text).substr(line_begin, line_end - line_begin), offset);
    if (!line.empty() && line.front() != '#') {
      last_row_begin = line_begin;
      int32_t rank = static_cast<int32_t>(table.ranks.size());
      if (rank == dims.ranks) {  // stop at the first extra row: the rest cannot be right
        diags.error(diag::kScheduleOutOfRange, SourceRange{file, line_begin, line_end},
                    fmt::format("row {} of the schedule table is one too many: the pipeline has {} rank{}, one row "
                                "per rank",
                                rank + 1, dims.ranks, dims.ranks == 1 ? "" : "s"));
        return std::nullopt;
      }
      table.ranks.emplace_back();
      uint32_t cell_begin = line_begin;
      while (cell_begin <= line_end) {
        size_t comma = text.find(',', cell_begin);
        uint32_t cell_end = (comma == std::string::npos || comma > line_end) ? line_end : static_cast<uint32_t>(comma);
        uint32_t at = cell_begin;
        std::string_view cell = trim(std::string_view(text).substr(cell_begin, cell_end - cell_begin), at);
        if (!cell.empty() && !is_communication_action(cell)) {
          SourceRange range{file, at, at + static_cast<uint32_t>(cell.size())};
          if (std::optional<Action> a = parse_action(cell)) {
            a->where = range;
            if (++actions > kMaxScheduleActions) {
              diags.error(
                  diag::kScheduleOutOfRange, range,
                  fmt::format("the schedule table has more than the {} actions dstc schedules", kMaxScheduleActions));
              return std::nullopt;
            }
            table.ranks[rank].push_back(*a);
          } else {
            diags.error(diag::kScheduleBadCell, range, fmt::format("'{}' is not a pipeline action", cell))
                .note(
                    "an action is STAGE, then F (forward), I (input-grad), W (weight-grad) or B (full backward), "
                    "then MICRO-BATCH, e.g. 0F1");
          }
        }
        cell_begin = cell_end + 1;
      }
    }
    line_begin = line_end + 1;
  }
  if (static_cast<int32_t>(table.ranks.size()) != dims.ranks) {
    SourceRange where{file, last_row_begin, last_row_begin};
    diags.error(
        diag::kScheduleOutOfRange, where,
        fmt::format("the schedule table has {} row{}, but the pipeline has {} rank{}: one row per rank",
                    table.ranks.size(), table.ranks.size() == 1 ? "" : "s", dims.ranks, dims.ranks == 1 ? "" : "s"));
  }
  if (diags.error_count() != errors_before) return std::nullopt;
  place_stages(table);
  return table;
}

std::string write_schedule_csv(const ScheduleTable& table) {
  std::string out;
  for (const auto& rank : table.ranks) {
    for (size_t i = 0; i < rank.size(); ++i) out += (i ? "," : "") + to_string(rank[i]);
    out += "\n";
  }
  return out;
}

}  // namespace dstc::schedule
