#include "compiler/search/table.h"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <vector>

#include <fmt/format.h>

#include "compiler/search/ranking.h"

namespace dstc::search {

std::string format_duration(double seconds) {
  if (seconds >= 1) return fmt::format("{:.3g} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.4g} ms", seconds * 1e3);
  return fmt::format("{:.4g} us", seconds * 1e6);
}

std::string format_memory(int64_t bytes) {
  auto b = static_cast<double>(bytes);
  if (bytes >= (int64_t{1} << 30)) return fmt::format("{:.1f} GiB", b / (1 << 30));
  return fmt::format("{:.1f} MiB", b / (1 << 20));
}

std::string format_rate(double per_second) {
  if (per_second >= 1000) return fmt::format("{:.0f}", per_second);
  return fmt::format("{:.4g}", per_second);
}

std::string parallelism_name(uint8_t bits) {
  std::string name;
  auto add = [&](uint8_t bit, std::string_view what) {
    if (bits & bit) name += fmt::format("{}{}", name.empty() ? "" : "+", what);
  };
  add(kData, "data");
  add(kTensor, "tensor");
  add(kPipeline, "pipeline");
  return name.empty() ? "single device" : name;
}

namespace {

std::string speedup_text(const std::optional<double>& s) { return s ? fmt::format("{:.2f}x", *s) : "-"; }

void print_summary(std::ostream& out, const SearchResult& r) {
  size_t ranked = r.count(ConfigStatus::ranked);
  size_t oom = r.count(ConfigStatus::out_of_memory);
  size_t invalid = r.count(ConfigStatus::invalid);
  size_t failed = r.count(ConfigStatus::internal_error);
  out << fmt::format("search {} ({}) on {}: {} configuration{} from a {}-point grid\n", r.search, r.file, r.cluster,
                     r.configs.size(), r.configs.size() == 1 ? "" : "s", r.grid_size);
  out << fmt::format("  {} ranked, {} out of memory (not ranked), {} invalid (skipped)", ranked, oom, invalid);
  if (size_t bound = r.count_memory_bound_only()) {
    out << fmt::format("; {} of the out of memory found by a memory lower bound before simulating", bound);
  }
  if (failed) out << fmt::format(", {} failed with an internal error", failed);
  out << "\n";
  if (const ConfigResult* c = r.first(ConfigStatus::invalid)) {
    out << fmt::format("  invalid, e.g. {}: {}\n", c->label, c->reason);
  }
  if (const ConfigResult* c = r.first(ConfigStatus::internal_error)) {
    out << fmt::format("  internal error (a dstc bug), e.g. {}: {}\n", c->label, c->reason);
  }
  auto baseline = [&](std::string_view kind, const std::optional<size_t>& best) {
    if (!best) return fmt::format("  best pure {} parallel: none in the space fits\n", kind);
    const ConfigResult& c = r.configs[*best];
    return fmt::format("  best pure {} parallel: {} ({} samples/s)\n", kind, c.label, format_rate(c.samples_per_s));
  };
  out << baseline("data", r.best_data) << baseline("tensor", r.best_tensor) << baseline("pipeline", r.best_pipeline);
}

}  // namespace

void print_search_table(std::ostream& out, const SearchResult& result, size_t top) {
  print_summary(out, result);
  std::vector<size_t> order = report_order(result);
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"rank", "configuration", "step time", "samples/s", "TFLOP/s/GPU", "MFU", "peak memory", "vs DP",
                  "vs TP", "vs PP"});
  for (size_t i : order) {
    const ConfigResult& c = result.configs[i];
    if (c.status != ConfigStatus::ranked || static_cast<size_t>(c.rank) > top) break;
    rows.push_back({std::to_string(c.rank), c.label, format_duration(c.step_time_s), format_rate(c.samples_per_s),
                    fmt::format("{:.1f}", c.tflops_per_gpu), fmt::format("{:.1f}%", c.mfu * 100),
                    format_memory(c.peak_memory_bytes), speedup_text(c.speedup_vs_data),
                    speedup_text(c.speedup_vs_tensor), speedup_text(c.speedup_vs_pipeline)});
  }
  if (rows.size() == 1) {
    out << "no configuration fits in memory\n";
    return;
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
  }
  out << "\n";
  for (const auto& row : rows) {
    std::string line;
    for (size_t k = 0; k < row.size(); ++k) {
      // The configuration reads left to right; figures line up on the right.
      line += k == 1 ? fmt::format("  {:<{}}", row[k], width[k]) : fmt::format("  {:>{}}", row[k], width[k]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line.substr(2) << "\n";
  }
}

}  // namespace dstc::search
