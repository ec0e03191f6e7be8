// What `dstc search` hands from the runner (search_runner.h) to the
// ranking, the table, the CSV/JSON writers and the plot: one record per
// configuration of the search space, in enumeration order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dstc::search {

enum class ConfigStatus {
  ranked,         // simulated and fits in memory
  out_of_memory,  // simulated, but some device needs more than it has
  invalid,        // the strategy has errors at this point (does not divide, too many devices, ...)
  internal_error  // dstc failed on it: a bug, reported apart from invalid points
};
std::string_view status_name(ConfigStatus status);

// Which kinds of parallelism a configuration uses: one bit per kind that
// some mesh axis of size > 1 provides.
enum ParallelismBits : uint8_t { kData = 1, kTensor = 2, kPipeline = 4 };

struct ConfigResult {
  size_t index = 0;                                        // enumeration order (point-major, then `try`)
  std::vector<std::pair<std::string, std::string>> point;  // search variable -> value as written
  std::string strategy;                                    // the `try`'s strategy
  std::string label;                                       // "dp=2 tp=4 pp=2 micro=8" (with the strategy when several)
  ConfigStatus status = ConfigStatus::invalid;
  std::string reason;  // invalid / internal_error: the first error, one line
  int64_t devices = 0;
  uint8_t parallelism = 0;  // ParallelismBits

  // Simulated (ranked and out_of_memory).
  double step_time_s = 0;
  double samples_per_s = 0;
  std::optional<double> tokens_per_s;
  double tflops_per_gpu = 0;
  double mfu = 0;
  int64_t peak_memory_bytes = 0;  // the largest over devices
  int64_t memory_capacity_bytes = 0;
  int64_t num_ops = 0;  // IR ops of the step
  // out_of_memory without simulating: even the memory lower bound of its
  // fewest micro-batches exceeds a device (search_memory_probe.h); the
  // step-time fields are empty and peak_memory_bytes holds that bound.
  bool memory_bound_only = false;

  // Filled by rank_search (search_ranking.h).
  int64_t rank = 0;  // 1 = fastest; 0 when not ranked
  bool pareto = false;
  std::optional<double> speedup_vs_data, speedup_vs_tensor, speedup_vs_pipeline;

  bool simulated() const {
    return (status == ConfigStatus::ranked || status == ConfigStatus::out_of_memory) && !memory_bound_only;
  }
};

struct SearchResult {
  std::string search;   // the search's name
  std::string file;     // the .dstrat file
  std::string cluster;  // the cluster's name
  uint64_t grid_size = 0;
  std::vector<ConfigResult> configs;  // enumeration order
  int jobs = 1;
  double elapsed_s = 0;  // elaboration, compilation and simulation of every configuration

  // Best pure data, tensor and pipeline parallel configuration (index into
  // configs), filled by rank_search.
  std::optional<size_t> best_data, best_tensor, best_pipeline;

  size_t count(ConfigStatus status) const;
  // Out of memory by their memory lower bound, not simulated.
  size_t count_memory_bound_only() const;
  // The first configuration with this status, or nullptr.
  const ConfigResult* first(ConfigStatus status) const;
};

}  // namespace dstc::search
