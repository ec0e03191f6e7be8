#include "compiler/search/ranking.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace dstc::search {

std::vector<bool> pareto_front(std::span<const ParetoPoint> points) {
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Fastest first, the smaller memory first among equally fast: a point is on
  // the front when it needs less memory than every faster one.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (points[a].throughput != points[b].throughput) return points[a].throughput > points[b].throughput;
    return points[a].memory < points[b].memory;
  });
  std::vector<bool> front(points.size(), false);
  double least_memory = std::numeric_limits<double>::infinity();
  for (size_t i : order) {
    if (points[i].memory < least_memory) {
      front[i] = true;
      least_memory = points[i].memory;
    }
  }
  return front;
}

namespace {

// A configuration is a baseline of one kind when that kind is all it uses.
void note_baseline(const SearchResult& result, std::optional<size_t>& best, size_t i) {
  if (!best || result.configs[i].samples_per_s > result.configs[*best].samples_per_s) best = i;
}

std::optional<double> speedup(const SearchResult& result, const std::optional<size_t>& best, const ConfigResult& c) {
  if (!best || result.configs[*best].samples_per_s <= 0) return std::nullopt;
  return c.samples_per_s / result.configs[*best].samples_per_s;
}

}  // namespace

void rank_search(SearchResult& result) {
  std::vector<size_t> fitting;
  for (size_t i = 0; i < result.configs.size(); ++i) {
    if (result.configs[i].status == ConfigStatus::ranked) fitting.push_back(i);
  }
  std::stable_sort(fitting.begin(), fitting.end(), [&](size_t a, size_t b) {
    return result.configs[a].samples_per_s > result.configs[b].samples_per_s;
  });
  std::vector<ParetoPoint> points;
  result.best_data = result.best_tensor = result.best_pipeline = std::nullopt;
  for (size_t r = 0; r < fitting.size(); ++r) {
    size_t i = fitting[r];
    ConfigResult& c = result.configs[i];
    c.rank = static_cast<int64_t>(r + 1);
    points.push_back({c.samples_per_s, static_cast<double>(c.peak_memory_bytes)});
    if (c.parallelism == kData) note_baseline(result, result.best_data, i);
    if (c.parallelism == kTensor) note_baseline(result, result.best_tensor, i);
    if (c.parallelism == kPipeline) note_baseline(result, result.best_pipeline, i);
  }
  std::vector<bool> front = pareto_front(points);
  for (size_t r = 0; r < fitting.size(); ++r) {
    ConfigResult& c = result.configs[fitting[r]];
    c.pareto = front[r];
    c.speedup_vs_data = speedup(result, result.best_data, c);
    c.speedup_vs_tensor = speedup(result, result.best_tensor, c);
    c.speedup_vs_pipeline = speedup(result, result.best_pipeline, c);
  }
}

std::vector<size_t> report_order(const SearchResult& result) {
  auto group = [](const ConfigResult& c) {
    switch (c.status) {
      case ConfigStatus::ranked: return 0;
      case ConfigStatus::out_of_memory: return 1;
      default: return 2;
    }
  };
  std::vector<size_t> order(result.configs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ConfigResult& x = result.configs[a];
    const ConfigResult& y = result.configs[b];
    if (group(x) != group(y)) return group(x) < group(y);
    if (group(x) == 0) return x.rank < y.rank;
    if (group(x) == 1) return x.samples_per_s > y.samples_per_s;
    return false;
  });
  return order;
}

}  // namespace dstc::search
