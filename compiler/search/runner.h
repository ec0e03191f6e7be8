// Running a search space: every point of the grid and every `try` is one
// configuration; each is elaborated, compiled and simulated on the cluster,
// and recorded as ranked, out of memory, invalid (with its first error) or
// failed (a dstc bug), never aborting the search.
//
// What configurations share is done once: the parsed files, the elaborated
// model (the front end's ModelCache) and the loaded cluster. `jobs` worker
// threads each take the next configuration, elaborate it (one at a time:
// the model cache is not thread-safe), then compile and simulate it in
// parallel with the others, with their own copy of the source manager and
// their own diagnostics. Configurations are elaborated as they are taken,
// so memory stays that of `jobs` configurations however large the space.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>

#include "compiler/frontend/frontend.h"
#include "compiler/search/result.h"
#include "htae/profile_database.h"

namespace dstc::search {

struct SearchRunOptions {
  int jobs = 0;  // 0: one per hardware thread
  // false: simulate every configuration, also those whose memory lower
  // bound already exceeds a device (search_memory_probe.h).
  bool prune_by_memory_bound = true;
  // Measured op and collective costs (dstc calibrate) for every simulation;
  // null: the cluster file's roofline.
  const htae::ProfileDatabase* profile = nullptr;
  // Called on the calling thread with (configurations done, total) a few
  // times a second while the workers run, and once at the end.
  std::function<void(size_t, size_t)> progress;
};

// nullopt when the search cannot run at all (its cluster file is missing or
// has errors), reported to `diags`. The result is in enumeration order and
// not yet ranked (search_ranking.h).
std::optional<SearchResult> run_search(frontend::FrontendResult& front, const frontend::SearchSpace& space,
                                       SourceManager& sources, DiagnosticEngine& diags,
                                       const SearchRunOptions& options);

}  // namespace dstc::search
