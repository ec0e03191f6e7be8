// Ranking a search's configurations: by throughput, with the speed-up over
// the best pure data, tensor and pipeline parallel configuration, and the
// Pareto front of throughput against peak memory.
#pragma once

#include <span>
#include <vector>

#include "compiler/search/result.h"

namespace dstc::search {

struct ParetoPoint {
  double throughput = 0;  // higher is better
  double memory = 0;      // lower is better
};

// true for the points no other point beats on one axis while matching it on
// the other; of identical points only the first is on the front.
std::vector<bool> pareto_front(std::span<const ParetoPoint> points);

// Fills rank (1 = most samples/s; ties keep enumeration order), pareto,
// best_data/best_tensor/best_pipeline and the speed-ups. Only configurations
// that fit in memory are ranked, are baselines or are on the front.
void rank_search(SearchResult& result);

// Indexes of configs in report order: ranked by rank, then out-of-memory
// ones by throughput, then invalid and failed ones in enumeration order.
std::vector<size_t> report_order(const SearchResult& result);

}  // namespace dstc::search
