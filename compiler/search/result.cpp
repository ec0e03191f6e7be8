#include "compiler/search/result.h"

#include <algorithm>

namespace dstc::search {

std::string_view status_name(ConfigStatus status) {
  switch (status) {
    case ConfigStatus::ranked: return "ranked";
    case ConfigStatus::out_of_memory: return "out-of-memory";
    case ConfigStatus::invalid: return "invalid";
    case ConfigStatus::internal_error: return "internal-error";
  }
  return "invalid";
}

size_t SearchResult::count(ConfigStatus status) const {
  return static_cast<size_t>(
      std::count_if(configs.begin(), configs.end(), [&](const ConfigResult& c) { return c.status == status; }));
}

size_t SearchResult::count_memory_bound_only() const {
  return static_cast<size_t>(
      std::count_if(configs.begin(), configs.end(), [](const ConfigResult& c) { return c.memory_bound_only; }));
}

const ConfigResult* SearchResult::first(ConfigStatus status) const {
  auto it = std::find_if(configs.begin(), configs.end(), [&](const ConfigResult& c) { return c.status == status; });
  return it == configs.end() ? nullptr : &*it;
}

}  // namespace dstc::search
