// The plot of `dstc search`: an SVG of every simulated configuration's
// peak memory per device against its throughput, with the device's memory
// capacity, the configurations that run out of it marked, the Pareto front
// (the fastest configuration for each memory budget) drawn, and the best one
// named. Written by hand: a fixed-size canvas, linear axes with ticks.
#pragma once

#include <iosfwd>

#include "compiler/search/result.h"

namespace dstc::search {

// `result` must have been ranked (rank_search). Every simulated
// configuration is one element with class "config" (and "oom" or "fits").
void write_search_svg(std::ostream& out, const SearchResult& result);

}  // namespace dstc::search
