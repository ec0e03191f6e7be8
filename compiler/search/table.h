// The text report of `dstc search`: what the space held (ranked, out of
// memory, invalid with an example reason), the best pure data, tensor and
// pipeline parallel configurations, and the top K as a table.
#pragma once

#include <iosfwd>
#include <string>

#include "compiler/search/result.h"

namespace dstc::search {

// `result` must have been ranked (rank_search).
void print_search_table(std::ostream& out, const SearchResult& result, size_t top);

// Human-readable figures shared by the table and the plot.
std::string format_duration(double seconds);  // "412.3 ms"
std::string format_memory(int64_t bytes);     // "18.2 GiB", "6.2 MiB"
std::string format_rate(double per_second);   // "1234", "12.35", "0.01234"
std::string parallelism_name(uint8_t bits);   // "data+tensor", "single device"

}  // namespace dstc::search
