#include "compiler/frontend/frontend.h"

#include <set>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"
#include "ir/source/spelling.h"

namespace dstc::frontend {

const CheckedStrategy* FrontendResult::find_strategy(std::string_view name) const {
  for (const CheckedStrategy& s : strategies) {
    if (s.decl->name == name) return &s;
  }
  return nullptr;
}

const SearchSpace* FrontendResult::find_search(std::string_view name) const {
  for (const SearchSpace& s : searches) {
    if (s.decl->name == name) return &s;
  }
  return nullptr;
}

namespace {

// Elaborates what the program's root files declare; of the strategies only
// `only_strategy` where the program declares one of that name (the others,
// whose models the -D values were not written for, are not elaborated).
void check_program(FrontendResult* result, std::string_view only_strategy, DiagnosticEngine& diags) {
  const Program& program = *result->program;
  bool one_strategy = false;
  for (size_t root : program.roots)
    for (const Item& item : program.files[root]->ast.items)
      if (const auto* s = std::get_if<StrategyDecl>(&item); s && !only_strategy.empty() && s->name == only_strategy)
        one_strategy = true;
  std::set<std::string> parameter_names;
  std::set<std::string> failed_models;  // their strategies would repeat the model's errors
  auto note_params = [&](const std::vector<ParamDecl>& params) {
    for (const ParamDecl& p : params) parameter_names.insert(p.name);
  };
  for (size_t root : program.roots) {
    for (const Item& item : program.files[root]->ast.items) {
      if (const auto* c = std::get_if<ComponentDecl>(&item); c && c->kind == ComponentKind::Model) {
        note_params(c->params);
        auto it = program.decls.find(c->name);
        if (it == program.decls.end() || it->second.component != c) continue;  // a duplicate, reported
        std::vector<ParamOverride> overrides;
        for (const ParamOverride& d : result->defines) {
          for (const ParamDecl& p : c->params) {
            if (p.name == d.name) overrides.push_back(d);
          }
        }
        if (const Model* m = result->model_cache.get(program, it->second, overrides, diags)) {
          result->models.push_back({c, m});
        } else {
          failed_models.insert(c->name);
        }
      } else if (const auto* s = std::get_if<StrategyDecl>(&item)) {
        note_params(s->params);
        auto it = program.decls.find(s->name);
        if (!s->has_model || it == program.decls.end() || it->second.strategy != s) continue;
        if (failed_models.count(s->model.name)) continue;
        if (const DeclRef* model = program.find_visible(s->model.name, root); model && model->component) {
          note_params(model->component->params);
        }
        if (one_strategy && s->name != only_strategy) continue;
        std::optional<Strategy> st =
            elaborate_strategy(program, it->second, {}, Scope{}, result->defines, result->model_cache, diags);
        if (st) result->strategies.push_back({s, std::move(*st)});
      } else if (const auto* q = std::get_if<SearchDecl>(&item)) {
        auto it = program.decls.find(q->name);
        if (it == program.decls.end() || it->second.search != q) continue;
        std::optional<SearchSpace> space = elaborate_search(program, it->second, result->defines, diags);
        if (!space) continue;
        size_t errors = diags.error_count();
        size_t points = enumerate_search(*space, diags, [](const std::vector<Value>&) { return true; });
        if (points == 0 && diags.error_count() == errors) {
          diags.error(diag::kEmptySearch, q->name_range,
                      fmt::format("no point of the {}-point grid of search '{}' satisfies its where clauses",
                                  space->grid_size, q->name));
        }
        result->searches.push_back(std::move(*space));
        result->search_points.push_back(points);
      }
    }
  }
  for (const ParamOverride& d : result->defines) {
    if (!parameter_names.count(d.name)) {
      auto error = diags.error(
          diag::kBadDefine, SourceRange{},
          fmt::format("-D {}: no model or strategy in the checked files has a parameter named '{}'", d.name, d.name));
      if (std::optional<std::string> meant = closest_spelling(d.name, {parameter_names.begin(), parameter_names.end()}))
        error.note(fmt::format("did you mean -D {}={}?", *meant, to_string(d.value)));
    }
  }
}

}  // namespace

std::unique_ptr<FrontendResult> check_files(const std::vector<std::string>& paths,
                                            const std::vector<std::string>& defines, SourceManager& sources,
                                            DiagnosticEngine& diags, std::string_view only_strategy) {
  auto result = std::make_unique<FrontendResult>();
  result->defines = parse_defines(defines, diags);
  result->program = load_program(paths, sources, diags);
  check_program(result.get(), only_strategy, diags);
  return result;
}

std::unique_ptr<FrontendResult> check_text(const std::string& path, std::string text,
                                           const std::vector<std::string>& defines, SourceManager& sources,
                                           DiagnosticEngine& diags) {
  auto result = std::make_unique<FrontendResult>();
  result->defines = parse_defines(defines, diags);
  result->program = load_program_text(path, std::move(text), sources, diags);
  check_program(result.get(), {}, diags);
  return result;
}

void check_against_cluster(const CheckedStrategy& strategy, const ClusterFacts& facts, DiagnosticEngine& diags) {
  const Strategy& s = strategy.strategy;
  int64_t needed = s.devices();
  if (needed <= facts.num_devices) return;
  SourceRange mesh_at = s.mesh.empty() ? s.range : s.mesh.front().range;
  diags
      .error(diag::kClusterTooSmall, mesh_at,
             fmt::format("mesh needs {} devices but the cluster has {}", needed, facts.num_devices))
      .note(s.cluster.range, fmt::format("cluster {}", s.cluster.written));
}

}  // namespace dstc::frontend
