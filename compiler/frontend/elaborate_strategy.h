// Elaborating strategies (compiler/frontend/strategy.h) and search spaces.
//
// A strategy's model parameters come from, lowest priority first: the
// model's defaults, the strategy's `for GPT(...)` arguments, its train
// `batch` (which sets the model parameter that sizes the batch dim), and
// `-D name=value` (which also sets strategy parameters of that name).
// Models are elaborated once per distinct parameter set (ModelCache), so
// elaborating many strategies of one search is cheap.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/elaborate_model.h"
#include "compiler/frontend/strategy.h"

namespace dstc::frontend {

// Elaborated models by (model, parameter values); pointers stay valid for
// the cache's life.
class ModelCache {
 public:
  const Model* get(const Program& program, const DeclRef& model, const std::vector<ParamOverride>& overrides,
                   DiagnosticEngine& diags);
  size_t size() const { return models_.size(); }

 private:
  std::map<std::string, std::unique_ptr<Model>> models_;
  std::map<std::string, bool> failed_;
};

// Elaborates `strategy` (it must have `for`): its parameters bound from
// `args` (evaluated in `caller`) and `defines`; `cluster_override` (a
// search's `on`) replaces the strategy's cluster. nullopt on errors.
std::optional<Strategy> elaborate_strategy(const Program& program, const DeclRef& strategy,
                                           const std::vector<Arg>& args, const Scope& caller,
                                           const std::vector<ParamOverride>& defines, ModelCache& models,
                                           DiagnosticEngine& diags, const ClusterRef* cluster_override = nullptr,
                                           size_t cluster_file = 0);

// Reports that the cluster file `ref` names was not found (resolved is "").
void report_missing_cluster(const ClusterReference& ref, DiagnosticEngine& diags);

// Resolves a cluster reference written in file `from_file` of `program`.
ClusterReference resolve_cluster(const Program& program, size_t from_file, const ClusterRef& ref, const Scope& scope,
                                 Evaluator& eval);

struct SearchVar {
  std::string name;
  std::vector<Value> values;
  SourceRange range;
};

struct SearchSpace {
  const SearchDecl* decl = nullptr;
  size_t file = 0;
  std::vector<SearchVar> vars;
  std::vector<const SearchStmt*> tries;  // `try Strategy(args)`, in order
  std::vector<ParamOverride> defines;
  uint64_t grid_size = 0;  // points before `where`
};

// Evaluates the `vary` domains of a search.
std::optional<SearchSpace> elaborate_search(const Program& program, const DeclRef& search,
                                            const std::vector<ParamOverride>& defines, DiagnosticEngine& diags);

// Visits, in row-major order (last variable fastest), every point of the
// grid that satisfies every `where`; point[i] is vars[i]'s value. Stops
// when `visit` returns false or an error is reported. Returns the number
// of points visited.
size_t enumerate_search(const SearchSpace& space, DiagnosticEngine& diags,
                        const std::function<bool(const std::vector<Value>&)>& visit);

// Elaborates `try` number `try_index` of the space at `point`.
std::optional<Strategy> elaborate_search_point(const Program& program, const SearchSpace& space,
                                               const std::vector<Value>& point, size_t try_index, ModelCache& models,
                                               DiagnosticEngine& diags);

}  // namespace dstc::frontend
