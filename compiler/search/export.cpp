#include "compiler/search/export.h"

#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/search/ranking.h"
#include "compiler/search/table.h"

namespace dstc::search {
namespace {

// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

std::string number(double v) { return fmt::format("{:.6g}", v); }
std::string optional_number(const std::optional<double>& v) { return v ? number(*v) : ""; }

nlohmann::ordered_json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json config_json(const ConfigResult& c) {
  nlohmann::ordered_json j;
  j["rank"] = c.rank > 0 ? nlohmann::ordered_json(c.rank) : nlohmann::ordered_json(nullptr);
  j["configuration"] = c.label;
  j["strategy"] = c.strategy;
  nlohmann::ordered_json point = nlohmann::ordered_json::object();
  for (const auto& [name, value] : c.point) point[name] = value;
  j["point"] = point;
  j["status"] = status_name(c.status);
  j["devices"] = c.devices;
  j["parallelism"] = parallelism_name(c.parallelism);
  if (c.simulated()) {
    j["step_time_s"] = c.step_time_s;
    j["samples_per_s"] = c.samples_per_s;
    j["tokens_per_s"] = optional_json(c.tokens_per_s);
    j["tflops_per_gpu"] = c.tflops_per_gpu;
    j["mfu"] = c.mfu;
    j["peak_memory_bytes"] = c.peak_memory_bytes;
    j["memory_capacity_bytes"] = c.memory_capacity_bytes;
    j["num_ops"] = c.num_ops;
  }
  if (c.memory_bound_only) {
    j["memory_lower_bound_bytes"] = c.peak_memory_bytes;
    j["memory_capacity_bytes"] = c.memory_capacity_bytes;
  }
  if (c.status == ConfigStatus::ranked) {
    j["pareto"] = c.pareto;
    j["speedup_vs_data"] = optional_json(c.speedup_vs_data);
    j["speedup_vs_tensor"] = optional_json(c.speedup_vs_tensor);
    j["speedup_vs_pipeline"] = optional_json(c.speedup_vs_pipeline);
  }
  if (!c.reason.empty()) j["reason"] = c.reason;
  return j;
}

}  // namespace

void write_search_csv(std::ostream& out, const SearchResult& result) {
  std::vector<std::string> header = {"rank", "configuration", "strategy"};
  if (!result.configs.empty()) {
    for (const auto& [name, value] : result.configs.front().point) header.push_back(name);
  }
  for (const char* column :
       {"status", "devices", "parallelism", "step_time_s", "samples_per_s", "tokens_per_s", "tflops_per_gpu", "mfu",
        "peak_memory_bytes", "memory_lower_bound_bytes", "memory_capacity_bytes", "num_ops", "pareto",
        "speedup_vs_data", "speedup_vs_tensor", "speedup_vs_pipeline", "reason"}) {
    header.emplace_back(column);
  }
  auto write_row = [&](const std::vector<std::string>& row) {
    for (size_t k = 0; k < row.size(); ++k) out << (k ? "," : "") << csv_field(row[k]);
    out << "\n";
  };
  write_row(header);
  for (size_t i : report_order(result)) {
    const ConfigResult& c = result.configs[i];
    std::vector<std::string> row = {c.rank > 0 ? std::to_string(c.rank) : "", c.label, c.strategy};
    for (const auto& [name, value] : c.point) row.push_back(value);
    bool sim = c.simulated();
    bool ranked = c.status == ConfigStatus::ranked;
    for (std::string field : std::initializer_list<std::string>{
             std::string(status_name(c.status)), std::to_string(c.devices), parallelism_name(c.parallelism),
             sim ? number(c.step_time_s) : "", sim ? number(c.samples_per_s) : "",
             sim ? optional_number(c.tokens_per_s) : "", sim ? number(c.tflops_per_gpu) : "", sim ? number(c.mfu) : "",
             sim ? std::to_string(c.peak_memory_bytes) : "",
             c.memory_bound_only ? std::to_string(c.peak_memory_bytes) : "",
             sim || c.memory_bound_only ? std::to_string(c.memory_capacity_bytes) : "",
             sim ? std::to_string(c.num_ops) : "", std::string(ranked ? (c.pareto ? "true" : "false") : ""),
             optional_number(c.speedup_vs_data), optional_number(c.speedup_vs_tensor),
             optional_number(c.speedup_vs_pipeline), c.reason}) {
      row.push_back(std::move(field));
    }
    write_row(row);
  }
}

void write_search_json(std::ostream& out, const SearchResult& result) {
  nlohmann::ordered_json j;
  j["search"] = result.search;
  j["file"] = result.file;
  j["cluster"] = result.cluster;
  j["grid_points"] = result.grid_size;
  j["configurations"] = result.configs.size();
  j["ranked"] = result.count(ConfigStatus::ranked);
  j["out_of_memory"] = result.count(ConfigStatus::out_of_memory);
  j["out_of_memory_by_bound"] = result.count_memory_bound_only();
  j["invalid"] = result.count(ConfigStatus::invalid);
  j["internal_errors"] = result.count(ConfigStatus::internal_error);
  auto best = [&](const std::optional<size_t>& i) {
    return i ? nlohmann::ordered_json(result.configs[*i].label) : nlohmann::ordered_json(nullptr);
  };
  j["best_pure"] = {
      {"data", best(result.best_data)}, {"tensor", best(result.best_tensor)}, {"pipeline", best(result.best_pipeline)}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i : report_order(result)) rows.push_back(config_json(result.configs[i]));
  j["results"] = rows;
  out << j.dump(2) << "\n";
}

}  // namespace dstc::search
