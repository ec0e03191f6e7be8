// Names of parameter replicas. A tied parameter replicated on several
// pipeline stages (PiPPy's REPLICATE) is one argument per device set: the
// first keeps the parameter's name, the copy first read by stage K is
// `NAME@stageK` (its optimizer states `NAME@stageK.adam_m`, ...). Tools that
// relate arguments to the model's parameters (the reference executor's
// initialisation, verify) read through the suffix.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dstc::ir {

inline std::string replica_name(std::string_view name, int32_t stage) {
  return std::string(name) + "@stage" + std::to_string(stage);
}

// `name` without its `@stageK` part, if it has one.
inline std::string logical_name(std::string_view name) {
  size_t at = name.find("@stage");
  if (at == std::string_view::npos) return std::string(name);
  size_t end = at + 6;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  return std::string(name.substr(0, at)) + std::string(name.substr(end));
}

// The fp32 master copy of a parameter stored in a lower precision: an
// optimizer state named `NAME.master`, starting equal to the parameter.
inline std::string master_name(std::string_view param) { return std::string(param) + ".master"; }

// The parameter `name` is the master copy of, or "" when it is not one.
inline std::string master_of(std::string_view name) {
  constexpr std::string_view suffix = ".master";
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) return {};
  return std::string(name.substr(0, name.size() - suffix.size()));
}

}  // namespace dstc::ir
