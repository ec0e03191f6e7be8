#include "compiler/driver/verify_scaling.h"

#include <algorithm>
#include <map>

#include "compiler/driver/verify_programs.h"

namespace dstc {
namespace {

// Both programs' cost with `values` for the parameters that differ from
// `start`, or nullopt when they do not compile.
std::optional<VerifyScale> cost_with(StrategyRequest request, const std::map<std::string, int64_t>& start,
                                     const std::map<std::string, int64_t>& values) {
  auto given = [&](const std::string& name) {
    return std::any_of(request.defines.begin(), request.defines.end(),
                       [&](const std::string& d) { return d.starts_with(name + "="); });
  };
  std::vector<std::string> defines;
  for (const std::string& d : request.defines)
    if (!values.contains(d.substr(0, d.find('=')))) defines.push_back(d);
  for (const auto& [name, value] : values)
    if (value != start.at(name) || given(name)) defines.push_back(name + "=" + std::to_string(value));
  request.defines = defines;
  SourceManager sources;
  DiagnosticEngine diags(sources);
  bool internal = false;
  std::optional<VerifyPrograms> programs = compile_verify_programs(request, sources, diags, internal);
  if (!programs) return std::nullopt;
  reference::ProgramWork single = programs->single_work(), strategy = programs->strategy_work();
  return VerifyScale{request.defines, single.total + strategy.total, single.bytes + strategy.bytes};
}

}  // namespace

std::optional<VerifyScale> find_verify_scale(const StrategyRequest& request, const frontend::Strategy& strategy,
                                             double max_work, double max_bytes) {
  // -D sets a model parameter and every strategy parameter of that name;
  // the strategy's value is the one in effect where both exist.
  std::map<std::string, int64_t> values;
  if (strategy.model)
    for (const auto& [name, value] : strategy.model->params)
      if (value.type == frontend::ValueType::Int) values[name] = value.i;
  for (const auto& [name, value] : strategy.params)
    if (value.type == frontend::ValueType::Int) values[name] = value.i;
  const std::map<std::string, int64_t> start = values;
  std::optional<VerifyScale> current = cost_with(request, start, values);
  if (!current) return std::nullopt;
  bool halved = false;
  auto small_enough = [&] { return halved && current->work <= max_work && current->bytes <= max_bytes; };
  // Keeps `candidate` when the file compiles with it and the step is no
  // dearer (halving the head count costs nothing, but lets the width halve).
  auto keep_if_cheaper = [&](const std::map<std::string, int64_t>& candidate) {
    std::optional<VerifyScale> cost = cost_with(request, start, candidate);
    if (!cost || cost->work > current->work || cost->bytes > current->bytes) return false;
    values = candidate;
    current = std::move(cost);
    halved = true;
    return true;
  };
  // A value stays at 2 or more: an axis of 2 devices, two layers or two
  // micro-batches exercise what more of them do; 1 would not.
  auto halvable = [](int64_t value) { return value >= 4; };
  // Each kept candidate halves at least one value, so this ends.
  for (bool changed = true; changed && !small_enough();) {
    // Everything at once first: one compile per round while it works.
    std::map<std::string, int64_t> all = values;
    bool any = false;
    for (auto& [name, value] : all)
      if (halvable(value)) value /= 2, any = true;
    changed = any && keep_if_cheaper(all);
    if (changed) continue;
    for (const auto& [name, value] : std::map<std::string, int64_t>(values)) {
      if (!halvable(value) || small_enough()) continue;
      std::map<std::string, int64_t> one = values;
      one[name] = value / 2;
      changed = keep_if_cheaper(one) || changed;
    }
  }
  return halved ? current : std::nullopt;
}

std::string define_arguments(const std::vector<std::string>& defines) {
  std::string out;
  for (const std::string& d : defines) out += (out.empty() ? "-D " : " -D ") + d;
  return out;
}

}  // namespace dstc
