// Machine-readable results of `dstc search`: CSV (one row per
// configuration) and JSON (the summary, the baselines, and the same rows).
// Both list every configuration in report order (search_ranking.h), with
// the search variables as columns / fields.
#pragma once

#include <iosfwd>

#include "compiler/search/result.h"

namespace dstc::search {

// `result` must have been ranked (rank_search).
void write_search_csv(std::ostream& out, const SearchResult& result);
void write_search_json(std::ostream& out, const SearchResult& result);

}  // namespace dstc::search
