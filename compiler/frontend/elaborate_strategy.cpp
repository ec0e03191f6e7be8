#include "compiler/frontend/elaborate_strategy.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "ir/mesh.h"
#include "ir/source/diagnostic_kinds.h"
#include "ir/source/spelling.h"

namespace dstc::frontend {
namespace {

std::string source_text(const DiagnosticEngine& diags, SourceRange r) {
  if (!r.valid()) return {};
  const std::string& text = diags.sources().file(r.file).text;
  return text.substr(r.begin, r.end - r.begin);
}

// A selector with its indexes evaluated.
struct Segment {
  bool any_name = false, any_depth = false;
  std::string name;
  SelectorSegment::Index index = SelectorSegment::Index::None;
  int64_t first = 0, last = 0;
};

struct NodeSegment {
  std::string name;
  int64_t index = -1;
};

bool segment_matches(const Segment& s, const NodeSegment& n) {
  if (!s.any_name && s.name != n.name) return false;
  switch (s.index) {
    case SelectorSegment::Index::None: return s.any_name || n.index < 0;
    case SelectorSegment::Index::One: return n.index == s.first;
    case SelectorSegment::Index::Range: return n.index >= s.first && n.index <= s.last;
    case SelectorSegment::Index::All: return n.index >= 0;
  }
  return false;
}

bool matches(const std::vector<Segment>& sel, size_t i, const std::vector<NodeSegment>& path, size_t j) {
  if (i == sel.size()) return j == path.size();
  if (sel[i].any_depth) {
    for (size_t k = j; k <= path.size(); ++k) {
      if (matches(sel, i + 1, path, k)) return true;
    }
    return false;
  }
  return j < path.size() && segment_matches(sel[i], path[j]) && matches(sel, i + 1, path, j + 1);
}

// One statement to apply, with the scope its expressions see (a template's
// body sees the template's parameters).
struct FlatStmt {
  const StrategyStmt* stmt;
  const Scope* scope;
};

class StrategyElaborator {
 public:
  StrategyElaborator(const Program& program, DiagnosticEngine& diags, ModelCache& models)
      : program_(program), diags_(diags), eval_(diags), models_(models) {}

  std::optional<Strategy> run(const DeclRef& ref, const std::vector<Arg>& args, const Scope& caller,
                              const std::vector<ParamOverride>& defines, const ClusterRef* cluster_override,
                              size_t cluster_file) {
    const StrategyDecl& decl = *ref.strategy;
    size_t errors = diags_.error_count();
    file_ = ref.file;
    out_.name = decl.name;
    out_.range = decl.name_range;
    if (!decl.has_model) {
      diags_.error(diag::kWrongKind, decl.name_range,
                   fmt::format("strategy '{}' has no `for MODEL`: it is a template for `use`", decl.name));
      return std::nullopt;
    }
    Scope& top = new_scope(nullptr);
    if (!bind_params(decl.params, args, caller, defines, eval_, top, decl.name_range, decl.name)) return std::nullopt;
    for (const ParamDecl& p : decl.params) {
      if (const Scope::Binding* b = top.find(p.name)) out_.params.emplace_back(p.name, b->value);
    }
    std::vector<const StrategyDecl*> using_stack{&decl};
    flatten(decl.body, top, using_stack);
    if (diags_.error_count() > errors) return std::nullopt;

    const DeclRef* model_ref = program_.lookup(decl.model.name, ref.file, decl.model.range, "model", diags_);
    if (!model_ref) return std::nullopt;
    if (model_ref->kind != DeclKind::Model) {
      diags_
          .error(diag::kWrongKind, decl.model.range,
                 fmt::format("'{}' is a {}, not a model", decl.model.name, decl_kind_name(model_ref->kind)))
          .note(model_ref->name_range, "declared here");
      return std::nullopt;
    }
    run_config();
    std::vector<ParamOverride> model_args = model_arguments(decl, *model_ref->component, top, defines);
    if (diags_.error_count() > errors) return std::nullopt;
    const Model* model = models_.get(program_, *model_ref, model_args, diags_);
    if (!model) return std::nullopt;
    out_.model = model;
    if (out_.run.batch == 0) out_.run.batch = model->batch;
    if (cluster_override) {
      out_.cluster = resolve_cluster(program_, cluster_file, *cluster_override, top, eval_);
    } else if (decl.has_cluster) {
      out_.cluster = resolve_cluster(program_, ref.file, decl.cluster, top, eval_);
    }
    build_paths();
    mesh();
    if (diags_.error_count() > errors) return std::nullopt;
    for (const FlatStmt& f : flat_) apply(f);
    check_stage_indices();
    if (diags_.error_count() > errors) return std::nullopt;
    finish_compute();
    finish_memory();
    finish_pipeline();
    if (diags_.error_count() > errors) return std::nullopt;
    return std::move(out_);
  }

 private:
  Scope& new_scope(const Scope* parent) {
    scopes_.push_back(std::make_unique<Scope>(parent));
    return *scopes_.back();
  }

  // ---- statements: lets, ifs and uses resolved ----

  void flatten(const std::vector<StrategyStmt>& body, Scope& scope, std::vector<const StrategyDecl*>& stack) {
    for (const StrategyStmt& s : body) {
      switch (s.kind) {
        case StrategyStmtKind::Let: {
          if (scope.has_own(s.name)) {
            diags_.error(diag::kDuplicateName, s.name_range, fmt::format("'{}' is already declared", s.name))
                .note(scope.find(s.name)->declared, "first declared here");
            break;
          }
          scope.set(s.name, eval_.eval(*s.value, scope), s.name_range);
          break;
        }
        case StrategyStmtKind::If: {
          bool taken = false;
          for (const StrategyBranch& b : s.branches) {
            std::optional<bool> c = eval_.eval_bool(*b.condition, scope, "an if condition");
            if (!c) return;
            if (*c) {
              flatten(b.body, scope, stack);
              taken = true;
              break;
            }
          }
          if (!taken && s.has_else) flatten(s.else_body, scope, stack);
          break;
        }
        case StrategyStmtKind::Use: use(s, scope, stack); break;
        default: flat_.push_back({&s, &scope});
      }
    }
  }

  void use(const StrategyStmt& s, Scope& scope, std::vector<const StrategyDecl*>& stack) {
    size_t from = program_.file_index(s.name_range.file);
    const DeclRef* ref = program_.lookup(s.name, from, s.name_range, "strategy template", diags_);
    if (!ref) return;
    if (ref->kind != DeclKind::Strategy || ref->strategy->has_model) {
      diags_
          .error(diag::kWrongKind, s.name_range,
                 fmt::format("'{}' is not a strategy template (a strategy without `for`)", s.name))
          .note(ref->name_range, "declared here");
      return;
    }
    if (std::find(stack.begin(), stack.end(), ref->strategy) != stack.end()) {
      std::string cycle;
      for (const StrategyDecl* d : stack) cycle += d->name + " -> ";
      diags_.error(diag::kUseCycle, s.name_range,
                   fmt::format("strategies use each other in a cycle: {}{}", cycle, s.name));
      return;
    }
    Scope& inner = new_scope(nullptr);
    if (!bind_params(ref->strategy->params, s.args, scope, {}, eval_, inner, s.range, s.name)) return;
    stack.push_back(ref->strategy);
    flatten(ref->strategy->body, inner, stack);
    stack.pop_back();
  }

  // ---- the run config and the model's parameters ----

  void run_config() {
    const FlatStmt* found = nullptr;
    for (const FlatStmt& f : flat_) {
      if (f.stmt->kind != StrategyStmtKind::Train && f.stmt->kind != StrategyStmtKind::Inference) continue;
      if (found) {
        diags_.error(diag::kBadConfig, f.stmt->range, "a strategy has one train or inference block")
            .note(found->stmt->range, "the first one");
        continue;
      }
      found = &f;
    }
    if (!found) return;  // training with the defaults
    RunConfig& run = out_.run;
    run.training = found->stmt->kind == StrategyStmtKind::Train;
    run.range = found->stmt->range;
    for (const ConfigEntry& e : found->stmt->entries) {
      const Scope& sc = *found->scope;
      if (e.key == "batch" || e.key == "accumulate") {
        std::optional<int64_t> v = eval_.eval_int(*e.value, sc, e.key);
        if (!v) continue;
        if (*v < 1) {
          diags_.error(diag::kBadConfig, e.value->range, fmt::format("{} must be at least 1", e.key));
          continue;
        }
        if (e.key == "accumulate" && !run.training) {
          diags_.error(diag::kBadConfig, e.key_range, "inference has no gradients to accumulate");
          continue;
        }
        // Each accumulation step is a pass of every micro-batch through the
        // schedule: past this, the program is millions of passes long.
        constexpr int64_t kMaxAccumulate = 1 << 16;
        if (e.key == "accumulate" && *v > kMaxAccumulate) {
          diags_.error(diag::kBadConfig, e.value->range,
                       fmt::format("accumulate must be at most {} steps, not {}", kMaxAccumulate, *v));
          continue;
        }
        (e.key == "batch" ? run.batch : run.accumulate) = *v;
        if (e.key == "batch") batch_range_ = e.value->range;
      } else if (e.key == "optimizer" && run.training) {
        std::string v = symbol(e, sc, {"sgd", "adam"});
        if (!v.empty()) run.optimizer = v == "sgd" ? Optimizer::Sgd : Optimizer::Adam;
      } else if (e.key == "precision" || (e.key == "grad_precision" && run.training)) {
        std::string v = symbol(e, sc, {"fp32", "bf16", "fp16"});
        if (!v.empty()) (e.key == "precision" ? run.precision : run.grad_precision) = *parse_source_dtype(v);
      } else if (e.key == "fp8") {
        std::string v = symbol(e, sc, {"none", "tensorwise", "rowwise", "blockwise"});
        if (!v.empty()) {
          run.fp8 = v == "none"         ? Fp8Recipe::None
                    : v == "tensorwise" ? Fp8Recipe::Tensorwise
                    : v == "rowwise"    ? Fp8Recipe::Rowwise
                                        : Fp8Recipe::Blockwise;
          run.fp8_range = e.key_range;
        }
      } else if (e.key == "master_weights" && run.training) {
        if (std::optional<bool> v = eval_.eval_bool(*e.value, sc, e.key)) {
          run.master_weights = *v;
          master_weights_range_ = e.key_range;
        }
      } else if (e.key == "tp_comm_overlap") {
        if (std::optional<bool> v = eval_.eval_bool(*e.value, sc, e.key)) run.tp_comm_overlap = *v;
      } else if (e.key == "expert_load") {
        expert_load(e, sc, run);
      } else if (e.key == "moe_dispatcher") {
        std::string v = symbol(e, sc, {"alltoall", "deepep"});
        if (!v.empty()) run.moe_dispatcher = v == "deepep" ? MoeDispatcher::Deduplicated : MoeDispatcher::AllToAll;
      } else if (e.key == "cp_comm_type") {
        if (Value a2a = eval_.eval(*e.value, sc); a2a.ok() && a2a.type == ValueType::Symbol && a2a.s == "a2a") {
          diags_
              .error(
                  diag::kBadConfig, e.value->range,
                  "cp_comm_type must be one of all_gather, p2p: a2a (DeepSpeed-Ulysses) is a layout, not an exchange")
              .note(
                  "split the attention core's heads over the cp axis (`**.attn.core compute [cp: S(n)]`) and the "
                  "other ops' sequence over it: the layout changes are the all-to-alls");
          continue;
        }
        std::string v = symbol(e, sc, {"all_gather", "p2p"});
        if (!v.empty()) {
          run.cp_exchange = v == "p2p" ? ContextParallelExchange::Ring : ContextParallelExchange::AllGather;
          run.cp_exchange_range = e.key_range;
        }
      } else if ((e.key == "kv_cache" || e.key == "context") && run.training) {
        diags_.error(diag::kBadConfig, e.key_range,
                     fmt::format("{} is a key of inference: a training step attends over its whole sequences", e.key));
      } else if (e.key == "kv_cache") {
        if (std::optional<bool> v = eval_.eval_bool(*e.value, sc, e.key)) run.kv_cache = *v;
      } else if (e.key == "context") {
        std::optional<int64_t> v = eval_.eval_int(*e.value, sc, e.key);
        // Past 2^31 positions the caches' sizes would overflow.
        constexpr int64_t kMaxContext = int64_t{1} << 31;
        if (v && *v < 0)
          diags_.error(diag::kBadConfig, e.value->range,
                       "context is how many positions per sequence the KV cache holds before this step, at least 0");
        else if (v && *v > kMaxContext)
          diags_.error(diag::kBadConfig, e.value->range,
                       fmt::format("context = {} positions is more than the {} a KV cache may hold", *v, kMaxContext));
        else if (v)
          run.context = *v;
        context_range_ = e.key_range;
      } else if (e.key == "overlap_grad_reduce" && run.training) {
        if (std::optional<bool> v = eval_.eval_bool(*e.value, sc, e.key)) run.overlap_grad_reduce = *v;
      } else if (e.key == "overlap_param_gather" && run.training) {
        if (std::optional<bool> v = eval_.eval_bool(*e.value, sc, e.key)) run.overlap_param_gather = *v;
      } else if (e.key == "batch_norm" && run.training) {
        std::string v = symbol(e, sc, {"sync", "local"});
        if (!v.empty()) run.batch_norm = v == "local" ? BatchNormStatistics::Local : BatchNormStatistics::Sync;
      } else if (e.key == "grad_bucket" && run.training) {
        std::optional<int64_t> v = eval_.eval_int(*e.value, sc, e.key);
        if (v && *v < 0)
          diags_.error(diag::kBadConfig, e.value->range,
                       "grad_bucket is a number of gradient elements, at least 0 (0: each tensor alone)");
        else if (v)
          run.grad_bucket = *v;
      } else {
        diags_.error(
            diag::kBadConfig, e.key_range,
            fmt::format("unknown key '{}' in {} (keys: batch, {}precision, fp8, tp_comm_overlap, cp_comm_type, "
                        "expert_load, moe_dispatcher{})",
                        e.key, run.training ? "train" : "inference",
                        run.training ? "optimizer, accumulate, master_weights, grad_precision, overlap_grad_reduce, "
                                       "overlap_param_gather, grad_bucket, batch_norm, "
                                     : "",
                        run.training ? "" : ", kv_cache, context"));
      }
    }
    if (run.fp8 != Fp8Recipe::None && run.precision == ir::DType::F32) {
      diags_
          .error(diag::kBadConfig, run.fp8_range,
                 "fp8 applies to bf16 and fp16 runs: FP8 matmuls write the compute precision")
          .note(run.range, "precision = bf16 in this block, as FP8 training runs");
    }
    if (context_range_.valid() && run.context > 0 && !run.kv_cache) {
      diags_.error(diag::kBadConfig, context_range_, "context counts the positions a KV cache holds, but there is none")
          .note(run.range, "kv_cache = true in this block keeps every attention's keys and values across steps");
    }
    if (master_weights_range_.valid() && run.precision == ir::DType::F32) {
      diags_.error(diag::kBadConfig, master_weights_range_,
                   "master_weights applies to bf16 and fp16 training; fp32 weights are their own master copy");
    }
  }

  // `expert_load = "file.csv"`, found beside the file that writes it.
  void expert_load(const ConfigEntry& e, const Scope& sc, RunConfig& run) {
    Value v = eval_.eval(*e.value, sc);
    if (!v.ok()) return;
    if (v.type != ValueType::String) {
      diags_.error(diag::kBadConfig, e.value->range,
                   "expert_load needs a file name in quotes: a CSV of tokens per expert, one row per MoE layer");
      return;
    }
    const std::string& from = program_.files[program_.file_index(e.value->range.file)]->path;
    std::optional<std::string> path = found_beside(from, v.s, e.value->range, "expert load file");
    if (!path) return;
    run.expert_load = *path;
    run.expert_load_range = e.value->range;
  }

  // `written`, a file named in `from_file`, resolved beside it; or a
  // file-not-found diagnostic at `range`, with a did-you-mean.
  std::optional<std::string> found_beside(const std::string& from_file, const std::string& written, SourceRange range,
                                          std::string_view what) {
    std::optional<std::string> path = resolve_relative(from_file, written);
    if (path) return path;
    auto error = diags_.error(diag::kFileNotFound, range, fmt::format("cannot find {} '{}'", what, written));
    if (std::optional<std::string> meant = closest_existing_path(from_file, written))
      error.note(fmt::format("did you mean \"{}\"?", *meant));
    return std::nullopt;
  }

  std::string symbol(const ConfigEntry& e, const Scope& sc, std::vector<std::string> allowed) {
    Value v = eval_.eval(*e.value, sc);
    if (!v.ok()) return {};
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
    if (v.type == ValueType::Symbol && std::find(allowed.begin(), allowed.end(), v.s) != allowed.end()) return v.s;
    auto error = diags_.error(diag::kBadConfig, e.value->range,
                              fmt::format("{} must be one of {}, not {}", e.key, list, to_string(v)));
    if (v.type == ValueType::Symbol)
      if (std::optional<std::string> meant = closest_spelling(v.s, allowed))
        error.note(fmt::format("did you mean '{}'?", *meant));
    return {};
  }

  std::vector<ParamOverride> model_arguments(const StrategyDecl& decl, const ComponentDecl& model, const Scope& top,
                                             const std::vector<ParamOverride>& defines) {
    std::vector<ParamOverride> out;
    for (const Arg& a : decl.model.args) {
      if (a.name.empty()) {
        diags_.error(diag::kArgumentMismatch, a.value->range, "model arguments are named: for GPT(layers = 24)");
        continue;
      }
      if (std::none_of(model.params.begin(), model.params.end(),
                       [&](const ParamDecl& p) { return p.name == a.name; })) {
        diags_
            .error(diag::kArgumentMismatch, a.name_range,
                   fmt::format("model {} has no parameter '{}'", model.name, a.name))
            .note(model.name_range, "declared here");
        continue;
      }
      Value v = eval_.eval(*a.value, top);
      if (v.ok()) out.push_back({a.name, v, a.value->range});
    }
    if (batch_range_.valid()) {
      // The train batch sets the parameter that sizes the first input's first dim.
      const Stmt* first_input = nullptr;
      for (const Stmt& s : model.body) {
        if (s.kind == StmtKind::Input) {
          first_input = &s;
          break;
        }
      }
      const Expr* size = first_input && !first_input->dims.empty() ? first_input->dims[0].size.get() : nullptr;
      bool is_param = size && size->kind == ExprKind::Name &&
                      std::any_of(model.params.begin(), model.params.end(),
                                  [&](const ParamDecl& p) { return p.name == size->text; });
      if (!is_param) {
        diags_
            .error(diag::kBadConfig, batch_range_,
                   fmt::format("the train batch sets the model parameter that sizes its batch dim, but {}'s first "
                               "input's first dim is not sized by a parameter",
                               model.name))
            .note(first_input ? first_input->range : model.name_range, "the batch dim");
      } else {
        out.push_back({size->text, Value::of_int(out_.run.batch), batch_range_});
      }
    }
    for (const ParamOverride& d : defines) {
      if (std::any_of(model.params.begin(), model.params.end(), [&](const ParamDecl& p) { return p.name == d.name; })) {
        out.push_back(d);
      }
    }
    return out;
  }

  // ---- the mesh ----

  void mesh() {
    const FlatStmt* found = nullptr;
    for (const FlatStmt& f : flat_) {
      if (f.stmt->kind != StrategyStmtKind::Mesh) continue;
      if (found) {
        diags_.error(diag::kBadMesh, f.stmt->range, "a strategy has one mesh")
            .note(found->stmt->range, "the first one");
        return;
      }
      found = &f;
    }
    if (!found) {
      diags_.error(diag::kBadMesh, out_.range,
                   fmt::format("strategy '{}' has no mesh: write mesh [dp: N, ...]", out_.name));
      return;
    }
    int64_t devices = 1;
    for (const MeshAxisDecl& a : found->stmt->axes) {
      std::optional<int64_t> size =
          eval_.eval_int(*a.size, *found->scope, fmt::format("the size of mesh axis {}", a.name));
      if (!size) continue;
      if (*size < 1) {
        diags_.error(diag::kBadMesh, a.size->range,
                     fmt::format("mesh axis {} has size {}; sizes must be at least 1", a.name, *size));
        continue;
      }
      if (out_.axis_index(a.name) >= 0) {
        diags_.error(diag::kBadMesh, a.name_range, fmt::format("mesh axis {} is declared twice", a.name));
        continue;
      }
      if (out_.mesh.size() == static_cast<size_t>(ir::kMaxMeshAxes)) {
        diags_.error(diag::kBadMesh, a.name_range,
                     fmt::format("mesh axis {} is one too many: a mesh has at most {} axes", a.name, ir::kMaxMeshAxes));
        return;
      }
      if (__builtin_mul_overflow(devices, *size, &devices)) {
        diags_.error(diag::kIntegerOverflow, a.size->range, "the mesh's device count overflows");
        return;
      }
      out_.mesh.push_back({a.name, *size, a.name_range});
    }
  }

  // ---- selectors ----

  void build_paths() {
    const Model& m = *out_.model;
    paths_.resize(m.nodes.size());
    for (size_t i = 1; i < m.nodes.size(); ++i) {
      const Node& n = m.nodes[i];
      paths_[i] = paths_[static_cast<size_t>(n.parent)];
      if (m.nodes[n.parent].kind == NodeKind::Repeat) {
        paths_[i].back().index = n.index;
      } else {
        paths_[i].push_back({n.name, -1});
      }
    }
  }

  std::optional<std::vector<Segment>> segments(const Selector& sel, const Scope& scope) {
    std::vector<Segment> out;
    for (const SelectorSegment& s : sel.segments) {
      Segment g;
      g.any_name = s.any_name;
      g.any_depth = s.any_depth;
      g.name = s.name;
      g.index = s.index;
      if (s.first) {
        std::optional<int64_t> v = eval_.eval_int(*s.first, scope, "a selector index");
        if (!v) return std::nullopt;
        g.first = *v;
      }
      if (s.last) {
        std::optional<int64_t> v = eval_.eval_int(*s.last, scope, "a selector index");
        if (!v) return std::nullopt;
        g.last = *v;
      }
      out.push_back(std::move(g));
    }
    return out;
  }

  std::vector<NodeId> match_nodes(const std::vector<Segment>& sel) {
    std::vector<NodeId> out;
    for (size_t i = 1; i < paths_.size(); ++i) {
      if (matches(sel, 0, paths_[i], 0)) out.push_back(static_cast<NodeId>(i));
    }
    return out;
  }

  // A selector that matches nothing: names its first segment after which
  // nothing matches, with the name it most likely misspells, or the names
  // that would match there. A parameter selector's last segment may name a
  // parameter rather than a node, and is not judged.
  void explain_no_match(DiagnosticEngine::Builder& error, const std::vector<Segment>& sel, bool of_params = false) {
    for (size_t k = 1; k <= sel.size() - (of_params ? 1 : 0); ++k) {
      std::vector<Segment> prefix(sel.begin(), sel.begin() + static_cast<std::ptrdiff_t>(k));
      if (!match_nodes(prefix).empty()) continue;
      Segment& wrong = prefix.back();
      if (wrong.any_name || wrong.any_depth) return;
      std::set<std::string> names;
      for (size_t i = 1; i < paths_.size(); ++i) names.insert(paths_[i].back().name);
      if (names.count(wrong.name)) return;  // a known name: the index or the position is what fails
      std::vector<std::string> fitting;
      std::string written = wrong.name;
      for (const std::string& name : names) {
        wrong.name = name;
        if (!match_nodes(prefix).empty()) fitting.push_back(name);
      }
      if (fitting.empty()) return;
      if (std::optional<std::string> meant = closest_spelling(written, fitting)) {
        error.note(fmt::format("no node is named '{}' there; did you mean '{}'?", written, *meant));
        return;
      }
      constexpr size_t kListed = 8;
      std::string list;
      for (size_t i = 0; i < std::min(fitting.size(), kListed); ++i) list += (i ? ", " : "") + fitting[i];
      if (fitting.size() > kListed) list += fmt::format(" and {} more", fitting.size() - kListed);
      error.note(fmt::format("no node is named '{}' there; the names there are {}", written, list));
      return;
    }
  }

  // Parameters whose `node path . name` matches, and all under matched nodes.
  // Per node: whether it is a matched node or below one (`**` matches all).
  std::vector<bool> matched_subtrees(const std::vector<Segment>& sel) {
    const Model& m = *out_.model;
    std::vector<bool> under(m.nodes.size(), false);
    for (NodeId n : match_nodes(sel)) under[static_cast<size_t>(n)] = true;
    if (sel.size() == 1 && sel[0].any_depth) under[0] = true;
    for (size_t i = 1; i < m.nodes.size(); ++i) under[i] = under[i] || under[static_cast<size_t>(m.nodes[i].parent)];
    return under;
  }

  std::vector<TensorId> match_params(const std::vector<Segment>& sel) {
    const Model& m = *out_.model;
    std::vector<bool> under = matched_subtrees(sel);
    std::vector<TensorId> out;
    for (size_t t = 0; t < m.tensors.size(); ++t) {
      const Tensor& tensor = m.tensors[t];
      if (tensor.role != TensorRole::Param) continue;
      auto node = static_cast<size_t>(tensor.node);
      bool hit = under[node];
      if (!hit) {
        std::vector<NodeSegment> path = paths_[node];
        path.push_back({tensor.name.substr(tensor.name.rfind('.') + 1), -1});
        hit = matches(sel, 0, path, 0);
      }
      if (hit) out.push_back(static_cast<TensorId>(t));
    }
    return out;
  }

  std::string text(const Selector& s) { return source_text(diags_, s.range); }

  // ---- applying statements ----

  void apply(const FlatStmt& f) {
    const StrategyStmt& s = *f.stmt;
    switch (s.kind) {
      case StrategyStmtKind::Schedule: schedule(s, *f.scope); break;
      case StrategyStmtKind::Pipeline:
      case StrategyStmtKind::PipelineStages: pipeline(s, *f.scope); break;
      case StrategyStmtKind::DefaultCompute: default_compute(s); break;
      case StrategyStmtKind::Compute: compute(s, *f.scope); break;
      case StrategyStmtKind::Memory: memory(s, *f.scope); break;
      case StrategyStmtKind::Tie: tie(s, *f.scope); break;
      default: break;  // mesh and run configs are read first
    }
  }

  void schedule(const StrategyStmt& s, const Scope& scope) {
    std::vector<NodeId> nodes{0};
    std::string sel_text;
    if (s.has_selector) {
      std::optional<std::vector<Segment>> sel = segments(s.selectors[0], scope);
      if (!sel) return;
      nodes = match_nodes(*sel);
      sel_text = text(s.selectors[0]);
      if (nodes.empty()) {
        auto error = diags_.error(diag::kSelectorNoMatch, s.selectors[0].range,
                                  fmt::format("selector '{}' matches no node of {}", sel_text, out_.model->name));
        explain_no_match(error, *sel);
        return;
      }
      // A leaf takes only `recompute` (selective recomputation, e.g. of the
      // attention core) and `fp8`; micro-batches and schedules belong to
      // inner nodes.
      const ConfigEntry* not_recompute = nullptr;
      for (const ConfigEntry& e : s.entries)
        if (e.key != "recompute" && e.key != "fp8" && !not_recompute) not_recompute = &e;
      for (NodeId n : nodes) {
        const Node& node = out_.model->nodes[n];
        if (node.is_leaf() && not_recompute) {
          diags_
              .error(diag::kScheduleOnLeaf, not_recompute->key_range,
                     fmt::format("{} is a leaf ({}); a leaf's schedule config sets only recompute and fp8, {} "
                                 "goes on an inner node",
                                 node.path, node.component, not_recompute->key))
              .note(node.range, "instantiated here");
          return;
        }
      }
    }
    ScheduleConfig c;
    c.selector = sel_text;
    c.range = s.range;
    for (const ConfigEntry& e : s.entries) {
      if (e.key == "micro_batches" || e.key == "max_ongoing") {
        std::optional<int64_t> v = eval_.eval_int(*e.value, scope, e.key);
        if (!v) continue;
        if (*v < 1) {
          diags_.error(diag::kBadConfig, e.value->range, fmt::format("{} must be at least 1", e.key));
          continue;
        }
        if (e.key == "micro_batches") {
          if (out_.run.batch % *v != 0) {
            auto b = diags_.error(diag::kMicroBatches, e.value->range,
                                  fmt::format("{} micro-batches do not divide the batch of {}", *v, out_.run.batch));
            if (batch_range_.valid()) b.note(batch_range_, "the batch");
            continue;
          }
          c.micro_batches = *v;
        } else {
          c.max_ongoing = *v;
        }
      } else if (e.key == "recompute") {
        std::optional<bool> v = eval_.eval_bool(*e.value, scope, "recompute");
        if (v) c.recompute = *v;
      } else if (e.key == "fp8") {
        std::optional<bool> v = eval_.eval_bool(*e.value, scope, "fp8");
        if (!v) continue;
        if (*v && out_.run.fp8 == Fp8Recipe::None) {
          diags_
              .error(diag::kBadConfig, e.value->range,
                     "fp8 = true on a node needs an FP8 recipe for the run to follow: set `fp8 = tensorwise`, "
                     "`rowwise` or `blockwise` in the train or inference block, and `fp8 = false` where GEMMs stay out "
                     "of it")
              .note(out_.run.range, "the run's block");
          continue;
        }
        c.fp8 = *v;
      } else if (e.key == "overlap_all_to_all") {
        std::optional<bool> v = eval_.eval_bool(*e.value, scope, "overlap_all_to_all");
        if (v) c.overlap_all_to_all = *v;
      } else if (e.key == "kind") {
        schedule_kind(e, scope, c);
      } else {
        diags_.error(diag::kBadConfig, e.key_range,
                     fmt::format("unknown schedule key '{}' (keys: micro_batches, max_ongoing, recompute, fp8, "
                                 "kind, overlap_all_to_all)",
                                 e.key));
      }
    }
    for (NodeId n : nodes) {
      c.node = n;
      out_.schedules.push_back(c);
    }
  }

  void schedule_kind(const ConfigEntry& e, const Scope& scope, ScheduleConfig& c) {
    const Expr& v = *e.value;
    std::string callee =
        v.kind == ExprKind::Call && v.items[0]->kind == ExprKind::Name ? lowercase(v.items[0]->text) : "";
    if (callee == "interleaved" || callee == "table") {
      bool interleaved = callee == "interleaved";
      size_t most = interleaved ? 1 : 2;
      if (v.args.empty() || v.args.size() > most ||
          std::any_of(v.args.begin(), v.args.end(), [](const auto& arg) { return !arg.name.empty(); })) {
        diags_.error(diag::kBadConfig, v.range,
                     interleaved ? "write interleaved(V) with V virtual stages"
                                 : "write table(\"file.csv\"), or table(\"file.csv\", V) with V stages per rank");
        return;
      }
      // interleaved(V)'s V, table(file, V)'s second argument: stages per rank.
      const Expr* stages = interleaved ? v.args[0].value.get() : v.args.size() == 2 ? v.args[1].value.get() : nullptr;
      if (stages) {
        Value n = eval_.eval(*stages, scope);
        if (n.type != ValueType::Int || n.i < 1) {
          diags_.error(diag::kBadConfig, stages->range,
                       fmt::format("{} needs an integer V >= 1", interleaved ? "interleaved(V)" : "table(file, V)"));
          return;
        }
        c.virtual_stages = n.i;
      }
      if (interleaved) {
        c.kind = schedule::ScheduleKind::Interleaved;
      } else {
        Value a = eval_.eval(*v.args[0].value, scope);
        if (a.type != ValueType::String) {
          diags_.error(diag::kBadConfig, v.args[0].value->range, "table(...) needs a file name in quotes");
          return;
        }
        std::optional<std::string> path =
            found_beside(program_.files[file_]->path, a.s, v.args[0].value->range, "schedule table");
        if (!path) return;
        c.table = *path;
      }
      return;
    }
    Value k = eval_.eval(v, scope);
    // Kinds are case-insensitive: papers write 1F1B and GPipe.
    std::string kind = k.type == ValueType::Symbol ? lowercase(k.s) : "";
    if (kind == "gpipe" || kind == "1f1b" || kind == "zb_h1" || kind == "zb_2p") {
      c.kind = kind == "gpipe"   ? schedule::ScheduleKind::GPipe
               : kind == "1f1b"  ? schedule::ScheduleKind::OneFOneB
               : kind == "zb_h1" ? schedule::ScheduleKind::ZeroBubbleH1
                                 : schedule::ScheduleKind::ZeroBubble2P;
      return;
    }
    if (kind == "zb_v" || kind == "dualpipe_v") {
      c.kind = kind == "zb_v" ? schedule::ScheduleKind::ZeroBubbleV : schedule::ScheduleKind::DualPipeV;
      c.virtual_stages = schedule::kZeroBubbleVStagesPerRank;
      return;
    }
    if (k.ok()) {
      auto error = diags_.error(diag::kBadConfig, v.range,
                                fmt::format("schedule kind must be gpipe, 1f1b, interleaved(V), zb_h1, zb_2p, zb_v, "
                                            "dualpipe_v or table(\"file.csv\"), "
                                            "not {}",
                                            to_string(k)));
      if (std::optional<std::string> meant =
              closest_spelling(kind, {"gpipe", "1f1b", "interleaved", "zb_h1", "zb_2p", "zb_v", "dualpipe_v", "table"}))
        error.note(fmt::format("did you mean '{}'?", *meant));
    }
  }

  void pipeline(const StrategyStmt& s, const Scope& scope) {
    if (out_.pipeline.present) {
      diags_.error(diag::kBadPipeline, s.range, "a strategy has one pipeline")
          .note(out_.pipeline.range, "the first one");
      return;
    }
    int axis = out_.axis_index(s.name);
    if (axis < 0) {
      diags_.error(diag::kUnknownAxis, s.name_range, fmt::format("the mesh has no axis '{}'", s.name));
      return;
    }
    PipelinePlacement& p = out_.pipeline;
    p.axis = static_cast<size_t>(axis);
    p.range = s.range;
    int64_t stages = out_.mesh[p.axis].size;
    if (s.kind == StrategyStmtKind::Pipeline) {
      std::optional<std::vector<Segment>> sel = segments(s.selectors[0], scope);
      if (!sel) return;
      std::vector<NodeId> nodes = match_nodes(*sel);
      if (nodes.size() == 1 && out_.model->nodes[nodes[0]].kind == NodeKind::Repeat) {
        nodes = out_.model->nodes[nodes[0]].children;
      }
      if (nodes.empty()) {
        auto error =
            diags_.error(diag::kSelectorNoMatch, s.selectors[0].range,
                         fmt::format("selector '{}' matches no node of {}", text(s.selectors[0]), out_.model->name));
        explain_no_match(error, *sel);
        return;
      }
      if (static_cast<int64_t>(nodes.size()) < stages) {
        diags_.error(diag::kBadPipeline, s.selectors[0].range,
                     fmt::format("{} nodes cannot fill the {} stages of axis {}", nodes.size(), stages, s.name));
        return;
      }
      for (int64_t k = 0; k < stages; ++k) p.stages.push_back({k, {}, s.range, {}});
      // Contiguous, as even as possible: the first (n mod stages) stages get one more.
      size_t n = nodes.size(), base = n / static_cast<size_t>(stages), extra = n % static_cast<size_t>(stages);
      size_t at = 0;
      for (size_t k = 0; k < static_cast<size_t>(stages); ++k) {
        size_t count = base + (k < extra ? 1 : 0);
        for (size_t j = 0; j < count; ++j) p.stages[k].nodes.push_back(nodes[at++]);
      }
    } else {
      for (const StageDecl& st : s.stages) {
        std::optional<int64_t> index = eval_.eval_int(*st.index, scope, "a stage index");
        if (!index) return;
        if (*index < 0) {
          diags_.error(diag::kBadPipeline, st.index->range,
                       fmt::format("stage {} is outside axis {} (0..{})", *index, s.name, stages - 1));
          return;
        }
        PipelineStage stage{*index, {}, st.range, st.index->range};
        for (const Selector& m : st.members) {
          std::optional<std::vector<Segment>> sel = segments(m, scope);
          if (!sel) return;
          std::vector<NodeId> nodes = match_nodes(*sel);
          if (nodes.empty()) {
            auto error = diags_.error(diag::kSelectorNoMatch, m.range,
                                      fmt::format("selector '{}' matches no node of {}", text(m), out_.model->name));
            explain_no_match(error, *sel);
            return;
          }
          stage.nodes.insert(stage.nodes.end(), nodes.begin(), nodes.end());
        }
        p.stages.push_back(std::move(stage));
      }
    }
    p.present = true;
  }

  // Written stages number ranks x virtual stages, known once every schedule
  // config is read.
  void check_stage_indices() {
    const PipelinePlacement& p = out_.pipeline;
    if (!p.present) return;
    int64_t ranks = out_.mesh[p.axis].size, virtual_stages = 1;
    for (const ScheduleConfig& c : out_.schedules) virtual_stages = std::max(virtual_stages, c.virtual_stages);
    for (const PipelineStage& st : p.stages) {
      if (st.index < ranks * virtual_stages) continue;
      const std::string& axis = out_.mesh[p.axis].name;
      if (virtual_stages == 1)
        diags_.error(diag::kBadPipeline, st.index_range,
                     fmt::format("stage {} is outside axis {} (0..{})", st.index, axis, ranks - 1));
      else
        diags_.error(
            diag::kBadPipeline, st.index_range,
            fmt::format("stage {} is outside the pipeline's {} stages ({} ranks of axis {} x {} virtual "
                        "stages: 0..{})",
                        st.index, ranks * virtual_stages, ranks, axis, virtual_stages, ranks * virtual_stages - 1));
      return;
    }
  }

  // Every leaf is placed: leaves outside the staged subtrees join the stage
  // of the nearest staged leaf before them (or the first stage). Explicit
  // stages must not overlap.
  void finish_pipeline() {
    PipelinePlacement& p = out_.pipeline;
    if (!p.present) return;
    const Model& m = *out_.model;
    std::vector<int> stage_of(m.nodes.size(), -1);
    for (size_t k = 0; k < p.stages.size(); ++k) {
      for (NodeId n : p.stages[k].nodes) {
        for (NodeId a = n; a != kNone; a = m.nodes[a].parent) {
          if (stage_of[static_cast<size_t>(a)] >= 0) {
            diags_
                .error(diag::kBadPipeline, p.stages[k].range,
                       fmt::format("{} is placed in two stages", m.nodes[n].path))
                .note(p.stages[static_cast<size_t>(stage_of[static_cast<size_t>(a)])].range, "also here");
            return;
          }
        }
        stage_of[static_cast<size_t>(n)] = static_cast<int>(k);
      }
    }
    int current = 0;
    bool explicit_stages = false;
    for (const PipelineStage& st : p.stages) explicit_stages = explicit_stages || st.range != p.range;
    for (size_t i = 1; i < m.nodes.size(); ++i) {
      auto parent = static_cast<size_t>(m.nodes[i].parent);
      if (stage_of[i] < 0 && parent != 0 && stage_of[parent] >= 0) stage_of[i] = stage_of[parent];
      if (!m.nodes[i].is_leaf()) continue;
      if (stage_of[i] >= 0) {
        current = stage_of[i];
        continue;
      }
      if (explicit_stages) {
        diags_.error(diag::kBadPipeline, p.range, fmt::format("{} is in no pipeline stage", m.nodes[i].path))
            .note(m.nodes[i].range, "instantiated here");
        return;
      }
      stage_of[i] = current;
      p.stages[static_cast<size_t>(current)].nodes.push_back(static_cast<NodeId>(i));
    }
  }

  // nd-SBP from the written list: one entry per mesh axis (B when not written).
  std::optional<std::vector<Sbp>> sbp_list(const std::vector<AxisSbp>& written, bool memory) {
    std::vector<Sbp> out(out_.mesh.size());
    std::vector<bool> seen(out_.mesh.size(), false);
    for (const AxisSbp& a : written) {
      int axis = out_.axis_index(a.axis);
      if (axis < 0) {
        diags_.error(diag::kUnknownAxis, a.axis_range, fmt::format("the mesh has no axis '{}'", a.axis));
        return std::nullopt;
      }
      if (seen[static_cast<size_t>(axis)]) {
        diags_.error(diag::kBadSbp, a.axis_range, fmt::format("axis {} is given twice", a.axis));
        return std::nullopt;
      }
      seen[static_cast<size_t>(axis)] = true;
      Sbp& s = out[static_cast<size_t>(axis)];
      s.written = true;
      if (a.kind == "S" && a.has_arg && a.arg == "flat" && !a.arg_is_int) {
        // Flat buffers hold stored state; an op computes on whole dims.
        if (!memory) {
          diags_.error(diag::kBadSbp, a.arg_range,
                       "S(flat) lays out stored parameters, gradients and optimizer state; a compute config "
                       "splits a named dim");
          return std::nullopt;
        }
        s.kind = ir::Sbp::Flat;
      } else if (a.kind == "S" && a.has_arg) {
        s.kind = ir::Sbp::Split;
        if (a.arg_is_int) {
          if (!memory || a.arg.size() > 3) {
            diags_.error(diag::kBadSbp, a.arg_range,
                         memory ? "dim index too large" : "compute configs split named dims: S(b), not S(0)");
            return std::nullopt;
          }
          s.dim_index = std::stoi(a.arg);
        } else {
          s.dim = a.arg;
        }
      } else if (a.kind == "B" && !a.has_arg) {
        s.kind = ir::Sbp::Broadcast;
      } else if (a.kind == "P" && (!a.has_arg || a.arg == "sum" || a.arg == "max")) {
        if (a.arg == "max" && !memory) {
          diags_.error(diag::kBadSbp, a.arg_range,
                       "a compute config's P is a sum: the op's inputs arrive partial and its output stays "
                       "partial; P(max) describes stored tensors");
          return std::nullopt;
        }
        s.kind = a.arg == "max" ? ir::Sbp::PartialMax : ir::Sbp::PartialSum;
      } else {
        diags_.error(diag::kBadSbp, a.kind_range,
                     fmt::format("an SBP is S(dim), S(flat), B, P, P(sum) or P(max), not {}{}", a.kind,
                                 a.has_arg ? "(" + a.arg + ")" : ""));
        return std::nullopt;
      }
      if (out_.pipeline.present && static_cast<size_t>(axis) == out_.pipeline.axis &&
          (s.kind == ir::Sbp::Split || s.kind == ir::Sbp::Flat)) {
        diags_.error(diag::kBadSbp, a.axis_range,
                     fmt::format("axis {} carries the pipeline; it cannot also split", a.axis));
        return std::nullopt;
      }
    }
    return out;
  }

  // Each split dim must be divisible by the product of the axes splitting it.
  // "blocks[3].attn.qkv (Linear)": a leaf as diagnostics name it.
  std::string leaf_label(NodeId leaf) const {
    const Node& n = out_.model->nodes[leaf];
    return fmt::format("{} ({})", n.path, n.component);
  }

  // `where()` names what the dims belong to, formatted only for a diagnostic.
  template <typename Where>
  bool divisible(const std::vector<Sbp>& sbp, const std::vector<Dim>& dims, SourceRange at, const Where& where) {
    for (const Dim& d : dims) {
      int64_t parts = 1;
      for (size_t a = 0; a < sbp.size(); ++a) {
        if (sbp[a].kind == ir::Sbp::Split && sbp[a].dim == d.name) parts *= out_.mesh[a].size;
      }
      if (d.size % parts != 0) {
        // One report per dim, size and split: the configs of a template
        // that all split the batch the same way are one problem.
        if (reported_splits_.insert({d.name, d.size, parts}).second)
          diags_.error(diag::kSplitNotDivisible, at,
                       fmt::format("dim {} of {} has size {}, which {} device{} cannot split evenly", d.name, where(),
                                   d.size, parts, parts == 1 ? "" : "s"));
        return false;
      }
    }
    return true;
  }

  template <typename Where>
  bool dims_known(const std::vector<Sbp>& sbp, const std::vector<Dim>& dims, const std::vector<AxisSbp>& written,
                  const Where& where, bool report) {
    for (size_t a = 0; a < sbp.size(); ++a) {
      if (sbp[a].kind != ir::Sbp::Split || sbp[a].dim.empty()) continue;
      if (std::none_of(dims.begin(), dims.end(), [&](const Dim& d) { return d.name == sbp[a].dim; })) {
        if (report) {
          std::string names;
          for (const Dim& d : dims) names += (names.empty() ? "" : ", ") + d.name;
          SourceRange at;
          for (const AxisSbp& w : written) {
            if (w.axis == out_.mesh[a].name) at = w.arg_range;
          }
          diags_.error(diag::kUnknownDim, at,
                       fmt::format("{} has no dim '{}' (its dims: {})", where(), sbp[a].dim, names));
        }
        return false;
      }
    }
    return true;
  }

  void default_compute(const StrategyStmt& s) {
    std::optional<std::vector<Sbp>> sbp = sbp_list(s.sbp, false);
    if (!sbp) return;
    // The default goes only to the ops that have the dim it splits; a dim
    // no op has would silently replicate every op.
    std::set<std::string> dims;
    const Model& m = *out_.model;
    for (size_t i = 1; i < m.nodes.size(); ++i) {
      if (!m.nodes[i].is_leaf()) continue;
      for (const Dim& d : m.leaf_dims(static_cast<NodeId>(i))) dims.insert(d.name);
    }
    for (const AxisSbp& w : s.sbp) {
      if (w.kind != "S" || !w.has_arg || w.arg_is_int || dims.count(w.arg)) continue;
      auto error =
          diags_.error(diag::kUnknownDim, w.arg_range,
                       fmt::format("no op of {} has a dim '{}', so this default would split nothing", m.name, w.arg));
      if (std::optional<std::string> meant = closest_spelling(w.arg, {dims.begin(), dims.end()}))
        error.note(fmt::format("did you mean '{}'?", *meant));
      error.note(fmt::format("the dims of {}'s ops are {}", m.name, fmt::join(dims, ", ")));
      return;
    }
    out_.default_compute = ComputeConfig{0, *sbp, true, "default", s.range};
    default_written_ = &s.sbp;
  }

  void compute(const StrategyStmt& s, const Scope& scope) {
    std::optional<std::vector<Segment>> sel = segments(s.selectors[0], scope);
    if (!sel) return;
    std::vector<NodeId> nodes = match_nodes(*sel);
    std::vector<NodeId> leaves;
    for (NodeId n : nodes) {
      if (out_.model->nodes[n].is_leaf()) leaves.push_back(n);
    }
    std::string sel_text = text(s.selectors[0]);
    if (leaves.empty()) {
      auto b = diags_.error(diag::kSelectorNoMatch, s.selectors[0].range,
                            fmt::format("selector '{}' matches no leaf of {}", sel_text, out_.model->name));
      if (!nodes.empty())
        b.note(fmt::format("it matches the inner node {}; select its leaves with {}.**",
                           out_.model->nodes[nodes[0]].path, sel_text));
      else
        explain_no_match(b, *sel);
      return;
    }
    std::optional<std::vector<Sbp>> sbp = sbp_list(s.sbp, false);
    if (!sbp) return;
    for (NodeId leaf : leaves) {
      const std::vector<Dim>& dims = out_.model->leaf_dims(leaf);
      auto where = [&] { return leaf_label(leaf); };
      if (!dims_known(*sbp, dims, s.sbp, where, true)) return;
      if (!divisible(*sbp, dims, s.range, where)) return;
      explicit_[leaf] = out_.compute.size();
      out_.compute.push_back({leaf, *sbp, false, sel_text, s.range});
    }
  }

  // The default config goes to every leaf without an explicit one that has
  // all the dims it splits.
  void finish_compute() {
    if (!out_.default_compute) return;
    const Model& m = *out_.model;
    for (size_t i = 1; i < m.nodes.size(); ++i) {
      auto leaf = static_cast<NodeId>(i);
      if (!m.nodes[i].is_leaf() || explicit_.count(leaf)) continue;
      const std::vector<Dim>& dims = m.leaf_dims(leaf);
      auto where = [&] { return leaf_label(leaf); };
      if (!dims_known(out_.default_compute->sbp, dims, *default_written_, where, false)) continue;
      if (!divisible(out_.default_compute->sbp, dims, out_.default_compute->range, where)) return;
      ComputeConfig c = *out_.default_compute;
      c.leaf = leaf;
      out_.compute.push_back(std::move(c));
    }
    std::sort(out_.compute.begin(), out_.compute.end(),
              [](const ComputeConfig& a, const ComputeConfig& b) { return a.leaf < b.leaf; });
  }

  void memory(const StrategyStmt& s, const Scope& scope) {
    uint8_t roles = 0;
    for (size_t i = 0; i < s.roles.size(); ++i) {
      const std::string& r = s.roles[i];
      if (r == "cache") {
        if (s.roles.size() > 1) {
          diags_.error(diag::kBadConfig, s.role_ranges[i],
                       "memory(cache) lays out attention's KV caches, which belong to layers, not to parameters: "
                       "give it a config of its own");
          return;
        }
        cache_memory(s, scope);
        return;
      }
      uint8_t bit = r == "param" ? kRoleParam : r == "grad" ? kRoleGrad : r == "optimizer" ? kRoleOptimizer : 0;
      if (!bit) {
        auto error = diags_.error(diag::kBadConfig, s.role_ranges[i],
                                  fmt::format("unknown memory role '{}' (roles: param, grad, optimizer, cache)", r));
        if (std::optional<std::string> meant = closest_spelling(r, {"param", "grad", "optimizer", "cache"}))
          error.note(fmt::format("did you mean '{}'?", *meant));
        return;
      }
      roles |= bit;
    }
    if (roles == 0) roles = kRoleAll;
    std::optional<std::vector<Segment>> sel = segments(s.selectors[0], scope);
    if (!sel) return;
    std::vector<TensorId> params = match_params(*sel);
    std::string sel_text = text(s.selectors[0]);
    if (params.empty()) {
      auto error = diags_.error(diag::kSelectorNoMatch, s.selectors[0].range,
                                fmt::format("selector '{}' matches no parameter of {}", sel_text, out_.model->name));
      explain_no_match(error, *sel, true);
      return;
    }
    std::optional<std::vector<Sbp>> sbp = sbp_list(s.sbp, true);
    if (!sbp) return;
    for (TensorId t : params) {
      const Tensor& tensor = out_.model->tensors[t];
      std::vector<Sbp> resolved = *sbp;
      for (Sbp& x : resolved) {
        if (x.kind != ir::Sbp::Split) continue;
        if (x.dim_index >= 0) {
          if (static_cast<size_t>(x.dim_index) >= tensor.dims.size()) {
            diags_.error(
                diag::kUnknownDim, s.range,
                fmt::format("{} has {} dims; S({}) is out of range", tensor.name, tensor.dims.size(), x.dim_index));
            return;
          }
          x.dim = tensor.dims[static_cast<size_t>(x.dim_index)].name;
        } else {
          auto it = std::find_if(tensor.dims.begin(), tensor.dims.end(), [&](const Dim& d) { return d.name == x.dim; });
          if (it == tensor.dims.end()) {
            if (!dims_known(
                    resolved, tensor.dims, s.sbp, [&] { return tensor.name; }, true))
              return;
          }
          x.dim_index = static_cast<int>(it - tensor.dims.begin());
        }
      }
      memory_candidates_.push_back({{t, roles, std::move(resolved), sel_text, s.range}, params.size()});
    }
  }

  // `memory(cache)`: the KV caches of the attention ops in the selected
  // leaves split their positions (the keys' sequence dim, by name or
  // index) over the axes written; B keeps them whole there.
  void cache_memory(const StrategyStmt& s, const Scope& scope) {
    std::optional<std::vector<Segment>> sel = segments(s.selectors[0], scope);
    if (!sel) return;
    const Model& m = *out_.model;
    std::vector<bool> under = matched_subtrees(*sel);
    std::vector<NodeId> leaves;
    const Op* attention = nullptr;  // the first, whose keys name the cache's dims
    for (size_t i = 1; i < m.nodes.size(); ++i) {
      if (!under[i] || !m.nodes[i].is_leaf()) continue;
      for (OpId op : m.nodes[i].ops)
        if (m.ops[op].kind == ops::OpKind::Attention) {
          leaves.push_back(static_cast<NodeId>(i));
          if (!attention) attention = &m.ops[op];
          break;
        }
    }
    if (leaves.empty()) {
      auto error = diags_.error(diag::kSelectorNoMatch, s.selectors[0].range,
                                fmt::format("selector '{}' matches no layer with an attention op, and only attention "
                                            "keeps a KV cache",
                                            text(s.selectors[0])));
      explain_no_match(error, *sel);
      return;
    }
    std::optional<std::vector<Sbp>> sbp = sbp_list(s.sbp, true);
    if (!sbp) return;
    const std::vector<std::string>& keys = attention->inputs[1].dims;
    const auto positions = static_cast<int>(keys.size()) - 2;
    for (size_t a = 0; a < sbp->size(); ++a) {
      Sbp& x = (*sbp)[a];
      if (!x.written || x.kind == ir::Sbp::Broadcast) continue;
      const bool by_position =
          x.kind == ir::Sbp::Split &&
          (x.dim_index >= 0 ? x.dim_index == positions : x.dim == keys[static_cast<size_t>(positions)]);
      if (!by_position) {
        SourceRange at = s.range;
        for (const AxisSbp& w : s.sbp)
          if (w.axis == out_.mesh[a].name) at = w.kind_range;
        diags_.error(diag::kCacheLayout, at,
                     fmt::format("a KV cache [{}] is laid out as its attention's keys and values; memory(cache) can "
                                 "only split its positions, S({}) or S({}), or keep it whole, B",
                                 fmt::join(keys, ", "), keys[static_cast<size_t>(positions)], positions));
        return;
      }
      x.dim = keys[static_cast<size_t>(positions)];
      x.dim_index = positions;
    }
    for (NodeId leaf : leaves) {
      auto same =
          std::find_if(out_.caches.begin(), out_.caches.end(), [&](const CacheConfig& c) { return c.leaf == leaf; });
      if (same != out_.caches.end()) out_.caches.erase(same);
      out_.caches.push_back({leaf, *sbp, s.range});
    }
  }

  // Where several memory configs set one role of a parameter, the most
  // specific wins: the one whose selector matches the fewest parameters
  // (`embed.table` over `**`), the later among equals. Only the winners
  // must split their parameters evenly.
  void finish_memory() {
    constexpr std::array<uint8_t, 3> kRoles = {kRoleParam, kRoleGrad, kRoleOptimizer};
    std::map<std::pair<TensorId, uint8_t>, size_t> winner;
    for (size_t i = 0; i < memory_candidates_.size(); ++i) {
      const MemoryCandidate& c = memory_candidates_[i];
      for (uint8_t role : kRoles) {
        if (!(c.config.roles & role)) continue;
        auto [it, inserted] = winner.emplace(std::pair{c.config.tensor, role}, i);
        if (!inserted && c.matched <= memory_candidates_[it->second].matched) it->second = i;
      }
    }
    std::map<std::pair<TensorId, size_t>, uint8_t> roles_won;
    for (const auto& [key, i] : winner) roles_won[{key.first, i}] |= key.second;
    for (const auto& [key, roles] : roles_won) {
      MemoryConfig config = memory_candidates_[key.second].config;
      config.roles = roles;
      const Tensor& tensor = out_.model->tensors[config.tensor];
      if (!divisible(config.sbp, tensor.dims, config.range, [&] { return tensor.name; })) return;
      out_.memory.push_back(std::move(config));
    }
  }

  void tie(const StrategyStmt& s, const Scope& scope) {
    TiedParams t;
    t.range = s.range;
    if (s.name == "transmit" || s.name == "replicate") {
      t.mode = s.name == "transmit" ? ParamSharing::Transmit : ParamSharing::Replicate;
    } else {
      diags_.error(diag::kBadTie, s.name_range, fmt::format("tie mode must be transmit or replicate, not {}", s.name));
      return;
    }
    for (const Selector& sel : s.selectors) {
      std::optional<std::vector<Segment>> segs = segments(sel, scope);
      if (!segs) return;
      std::vector<TensorId> params = match_params(*segs);
      if (params.size() != 1) {
        diags_.error(params.empty() ? diag::kSelectorNoMatch : diag::kBadTie, sel.range,
                     fmt::format("a tie names single parameters; '{}' matches {}", text(sel), params.size()));
        return;
      }
      const Tensor& a = out_.model->tensors[params[0]];
      if (!t.params.empty()) {
        const Tensor& first = out_.model->tensors[t.params[0]];
        std::vector<int64_t> sa, sf;
        for (const Dim& d : a.dims) sa.push_back(d.size);
        for (const Dim& d : first.dims) sf.push_back(d.size);
        if (sa != sf) {
          diags_.error(diag::kBadTie, sel.range, fmt::format("{} and {} have different shapes", first.name, a.name));
          return;
        }
      }
      t.params.push_back(params[0]);
    }
    out_.ties.push_back(std::move(t));
  }

  const Program& program_;
  DiagnosticEngine& diags_;
  Evaluator eval_;
  ModelCache& models_;
  size_t file_ = 0;
  Strategy out_;
  std::vector<std::unique_ptr<Scope>> scopes_;
  std::vector<FlatStmt> flat_;
  std::set<std::tuple<std::string, int64_t, int64_t>> reported_splits_;  // (dim, size, ways)
  std::vector<std::vector<NodeSegment>> paths_;
  std::map<NodeId, size_t> explicit_;
  // A memory config for one parameter, and how many parameters its selector matched.
  struct MemoryCandidate {
    MemoryConfig config;
    size_t matched = 0;
  };
  std::vector<MemoryCandidate> memory_candidates_;
  SourceRange batch_range_;
  SourceRange master_weights_range_;
  SourceRange context_range_;
  const std::vector<AxisSbp>* default_written_ = nullptr;
};

std::string cache_key(const std::string& model, const std::vector<ParamOverride>& overrides) {
  std::string key = model;
  for (const ParamOverride& o : overrides) key += "|" + o.name + "=" + to_string(o.value);
  return key;
}

}  // namespace

int64_t Strategy::devices() const {
  int64_t n = 1;
  for (const MeshAxis& a : mesh) n *= a.size;
  return n;
}

int Strategy::axis_index(std::string_view axis) const {
  for (size_t i = 0; i < mesh.size(); ++i) {
    if (mesh[i].name == axis) return static_cast<int>(i);
  }
  return -1;
}

const Model* ModelCache::get(const Program& program, const DeclRef& model, const std::vector<ParamOverride>& overrides,
                             DiagnosticEngine& diags) {
  std::string key = cache_key(model.component->name, overrides);
  if (auto it = models_.find(key); it != models_.end()) return it->second.get();
  if (failed_.count(key)) return nullptr;
  std::optional<Model> m = elaborate_model(program, model, overrides, diags);
  if (!m) {
    failed_[key] = true;
    return nullptr;
  }
  auto owned = std::make_unique<Model>(std::move(*m));
  const Model* ptr = owned.get();
  models_.emplace(key, std::move(owned));
  return ptr;
}

void report_missing_cluster(const ClusterReference& ref, DiagnosticEngine& diags) {
  auto error =
      diags.error(diag::kClusterNotFound, ref.range,
                  fmt::format("cannot find cluster file '{}' next to this file or in the stdlib", ref.written));
  if (!ref.range.valid()) return;
  const std::string& from_file = diags.sources().file(ref.range.file).path;
  if (std::optional<std::string> meant = closest_existing_path(from_file, ref.written))
    error.note(fmt::format("did you mean \"{}\"?", *meant));
}

ClusterReference resolve_cluster(const Program& program, size_t from_file, const ClusterRef& ref, const Scope& scope,
                                 Evaluator& eval) {
  ClusterReference c;
  c.written = ref.path;
  c.range = ref.range;
  c.resolved = resolve_relative(program.files[from_file]->path, ref.path).value_or("");
  for (const Arg& a : ref.args) {
    if (a.name.empty()) {
      eval.diags().error(diag::kArgumentMismatch, a.value->range, "cluster settings are named: (nodes = 4)");
      continue;
    }
    Value v = eval.eval(*a.value, scope);
    if (!v.ok()) continue;
    if (a.name == "nodes") {
      if (v.type != ValueType::Int || v.i < 1) {
        eval.diags().error(diag::kTypeMismatch, a.value->range, "nodes must be an integer of at least 1");
        continue;
      }
      c.nodes = v.i;
    }
    c.overrides.emplace_back(a.name, v);
  }
  return c;
}

std::optional<Strategy> elaborate_strategy(const Program& program, const DeclRef& strategy,
                                           const std::vector<Arg>& args, const Scope& caller,
                                           const std::vector<ParamOverride>& defines, ModelCache& models,
                                           DiagnosticEngine& diags, const ClusterRef* cluster_override,
                                           size_t cluster_file) {
  StrategyElaborator e(program, diags, models);
  return e.run(strategy, args, caller, defines, cluster_override, cluster_file);
}

std::optional<SearchSpace> elaborate_search(const Program& program, const DeclRef& search,
                                            const std::vector<ParamOverride>& defines, DiagnosticEngine& diags) {
  const SearchDecl& decl = *search.search;
  size_t errors = diags.error_count();
  Evaluator eval(diags);
  SearchSpace space;
  space.decl = &decl;
  space.file = search.file;
  space.defines = defines;
  Scope scope;
  for (const SearchStmt& s : decl.body) {
    if (s.kind == SearchStmtKind::Vary) {
      for (const VaryItem& v : s.vary) {
        if (std::any_of(space.vars.begin(), space.vars.end(), [&](const SearchVar& x) { return x.name == v.name; })) {
          diags.error(diag::kDuplicateName, v.name_range, fmt::format("'{}' is varied twice", v.name));
          continue;
        }
        Value domain = eval.eval(*v.domain, scope);
        if (!domain.ok()) continue;
        if (domain.type != ValueType::List || domain.list.empty()) {
          diags.error(
              diag::kTypeMismatch, v.domain->range,
              fmt::format("the values of {} must be a non-empty list: [1, 2, 4], pow2(1, 64), range(1, 8)", v.name));
          continue;
        }
        space.vars.push_back({v.name, std::move(domain.list), v.name_range});
      }
    } else if (s.kind == SearchStmtKind::Try) {
      const DeclRef* ref = program.lookup(s.name, search.file, s.name_range, "strategy", diags);
      if (!ref) continue;
      if (ref->kind != DeclKind::Strategy || !ref->strategy->has_model) {
        diags.error(diag::kWrongKind, s.name_range, fmt::format("'{}' is not a strategy for a model", s.name))
            .note(ref->name_range, "declared here");
        continue;
      }
      if (decl.has_model && ref->strategy->model.name != decl.model.name) {
        diags
            .error(diag::kWrongKind, s.name_range,
                   fmt::format("{} is for model {}, but this search is for {}", s.name, ref->strategy->model.name,
                               decl.model.name))
            .note(ref->strategy->model.range, "declared here");
        continue;
      }
      space.tries.push_back(&s);
    }
  }
  if (space.tries.empty() && diags.error_count() == errors) {
    diags.error(diag::kEmptySearch, decl.name_range, fmt::format("search '{}' has no `try Strategy(...)`", decl.name));
  }
  space.grid_size = 1;
  for (const SearchVar& v : space.vars) {
    if (__builtin_mul_overflow(space.grid_size, v.values.size(), &space.grid_size)) {
      diags.error(diag::kIntegerOverflow, v.range, "the search grid has more than 2^64 points");
      break;
    }
  }
  if (diags.error_count() > errors) return std::nullopt;
  return space;
}

namespace {

// Binds a point's values, then the search's lets, in a fresh scope.
bool bind_point(const SearchSpace& space, const std::vector<Value>& point, Evaluator& eval, Scope& scope) {
  for (size_t i = 0; i < space.vars.size(); ++i) scope.set(space.vars[i].name, point[i], space.vars[i].range);
  for (const SearchStmt& s : space.decl->body) {
    if (s.kind != SearchStmtKind::Let) continue;
    Value v = eval.eval(*s.value, scope);
    if (!v.ok()) return false;
    scope.set(s.name, v, s.name_range);
  }
  return true;
}

}  // namespace

size_t enumerate_search(const SearchSpace& space, DiagnosticEngine& diags,
                        const std::function<bool(const std::vector<Value>&)>& visit) {
  Evaluator eval(diags);
  size_t errors = diags.error_count();
  std::vector<size_t> at(space.vars.size(), 0);
  std::vector<Value> point(space.vars.size());
  size_t visited = 0;
  for (uint64_t n = 0; n < space.grid_size; ++n) {
    for (size_t i = 0; i < space.vars.size(); ++i) point[i] = space.vars[i].values[at[i]];
    Scope scope;
    if (!bind_point(space, point, eval, scope)) return visited;
    bool keep = true;
    for (const SearchStmt& s : space.decl->body) {
      if (s.kind != SearchStmtKind::Where) continue;
      std::optional<bool> ok = eval.eval_bool(*s.value, scope, "a where condition");
      if (!ok || diags.error_count() > errors) return visited;
      keep = keep && *ok;
    }
    if (keep) {
      ++visited;
      if (!visit(point)) return visited;
    }
    for (size_t i = space.vars.size(); i-- > 0;) {
      if (++at[i] < space.vars[i].values.size()) break;
      at[i] = 0;
    }
  }
  return visited;
}

std::optional<Strategy> elaborate_search_point(const Program& program, const SearchSpace& space,
                                               const std::vector<Value>& point, size_t try_index, ModelCache& models,
                                               DiagnosticEngine& diags) {
  Evaluator eval(diags);
  Scope scope;
  if (!bind_point(space, point, eval, scope)) return std::nullopt;
  const SearchStmt& t = *space.tries.at(try_index);
  const DeclRef* ref = program.find_visible(t.name, space.file);
  if (!ref) return std::nullopt;
  return elaborate_strategy(program, *ref, t.args, scope, space.defines, models, diags,
                            space.decl->has_cluster ? &space.decl->cluster : nullptr, space.file);
}

}  // namespace dstc::frontend
