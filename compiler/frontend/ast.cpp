#include "compiler/frontend/ast.h"

namespace dstc::frontend {
namespace {

bool same_ptr(const ExprPtr& a, const ExprPtr& b) {
  if (!a || !b) return !a && !b;
  return same(*a, *b);
}

template <typename T, typename Eq>
bool same_list(const std::vector<T>& a, const std::vector<T>& b, Eq eq) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!eq(a[i], b[i])) return false;
  }
  return true;
}

bool same_arg(const Arg& a, const Arg& b) { return a.name == b.name && same_ptr(a.value, b.value); }
bool same_args(const std::vector<Arg>& a, const std::vector<Arg>& b) { return same_list(a, b, same_arg); }

bool same_dim(const DimItem& a, const DimItem& b) {
  return a.ellipsis == b.ellipsis && a.name == b.name && same_ptr(a.size, b.size);
}
bool same_dims(const std::vector<DimItem>& a, const std::vector<DimItem>& b) { return same_list(a, b, same_dim); }

bool same_param(const ParamDecl& a, const ParamDecl& b) {
  return a.name == b.name && a.type == b.type && same_ptr(a.default_value, b.default_value);
}

bool same_stmt(const Stmt& a, const Stmt& b);
bool same_body(const std::vector<Stmt>& a, const std::vector<Stmt>& b) { return same_list(a, b, same_stmt); }

bool same_stmt(const Stmt& a, const Stmt& b) {
  if (a.kind != b.kind || a.name != b.name || a.has_dims != b.has_dims || a.dtype != b.dtype) return false;
  if (!same_dims(a.dims, b.dims) || !same_ptr(a.value, b.value)) return false;
  if (a.has_else != b.has_else || !same_body(a.else_body, b.else_body)) return false;
  return same_list(a.branches, b.branches, [](const Branch& x, const Branch& y) {
    return same_ptr(x.condition, y.condition) && same_body(x.body, y.body);
  });
}

bool same_segment(const SelectorSegment& a, const SelectorSegment& b) {
  return a.any_name == b.any_name && a.any_depth == b.any_depth && a.name == b.name && a.index == b.index &&
         same_ptr(a.first, b.first) && same_ptr(a.last, b.last);
}
bool same_selector(const Selector& a, const Selector& b) { return same_list(a.segments, b.segments, same_segment); }

bool same_sbp(const AxisSbp& a, const AxisSbp& b) {
  return a.axis == b.axis && a.kind == b.kind && a.has_arg == b.has_arg && a.arg == b.arg &&
         a.arg_is_int == b.arg_is_int;
}

bool same_entry(const ConfigEntry& a, const ConfigEntry& b) { return a.key == b.key && same_ptr(a.value, b.value); }

bool same_strategy_stmt(const StrategyStmt& a, const StrategyStmt& b);
bool same_strategy_body(const std::vector<StrategyStmt>& a, const std::vector<StrategyStmt>& b) {
  return same_list(a, b, same_strategy_stmt);
}

bool same_strategy_stmt(const StrategyStmt& a, const StrategyStmt& b) {
  if (a.kind != b.kind || a.has_selector != b.has_selector || a.name != b.name || a.roles != b.roles) return false;
  if (!same_list(a.axes, b.axes, [](const MeshAxisDecl& x, const MeshAxisDecl& y) {
        return x.name == y.name && same_ptr(x.size, y.size);
      }))
    return false;
  if (!same_list(a.entries, b.entries, same_entry) || !same_list(a.selectors, b.selectors, same_selector)) return false;
  if (!same_list(a.stages, b.stages, [](const StageDecl& x, const StageDecl& y) {
        return same_ptr(x.index, y.index) && same_list(x.members, y.members, same_selector);
      }))
    return false;
  if (!same_list(a.sbp, b.sbp, same_sbp) || !same_args(a.args, b.args) || !same_ptr(a.value, b.value)) return false;
  if (a.has_else != b.has_else || !same_strategy_body(a.else_body, b.else_body)) return false;
  return same_list(a.branches, b.branches, [](const StrategyBranch& x, const StrategyBranch& y) {
    return same_ptr(x.condition, y.condition) && same_strategy_body(x.body, y.body);
  });
}

bool same_model_ref(const ModelRef& a, const ModelRef& b) {
  return a.name == b.name && a.has_args == b.has_args && same_args(a.args, b.args);
}
bool same_cluster(const ClusterRef& a, const ClusterRef& b) {
  return a.path == b.path && a.has_args == b.has_args && same_args(a.args, b.args);
}

bool same_search_stmt(const SearchStmt& a, const SearchStmt& b) {
  return a.kind == b.kind && a.name == b.name && same_ptr(a.value, b.value) && same_args(a.args, b.args) &&
         same_list(a.vary, b.vary, [](const VaryItem& x, const VaryItem& y) {
           return x.name == y.name && same_ptr(x.domain, y.domain);
         });
}

struct SameItem {
  bool operator()(const ImportDecl& a, const ImportDecl& b) const { return a.path == b.path; }
  bool operator()(const ComponentDecl& a, const ComponentDecl& b) const {
    return a.kind == b.kind && a.name == b.name && a.has_param_list == b.has_param_list &&
           same_list(a.params, b.params, same_param) && same_body(a.body, b.body);
  }
  bool operator()(const StrategyDecl& a, const StrategyDecl& b) const {
    return a.name == b.name && a.has_param_list == b.has_param_list && same_list(a.params, b.params, same_param) &&
           a.has_model == b.has_model && same_model_ref(a.model, b.model) && a.has_cluster == b.has_cluster &&
           same_cluster(a.cluster, b.cluster) && same_strategy_body(a.body, b.body);
  }
  bool operator()(const SearchDecl& a, const SearchDecl& b) const {
    return a.name == b.name && a.has_model == b.has_model && same_model_ref(a.model, b.model) &&
           a.has_cluster == b.has_cluster && same_cluster(a.cluster, b.cluster) &&
           same_list(a.body, b.body, same_search_stmt);
  }
  template <typename A, typename B>
  bool operator()(const A&, const B&) const {
    return false;
  }
};

}  // namespace

bool same(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.text != b.text) return false;
  switch (a.kind) {
    case ExprKind::Int: return a.int_value == b.int_value;
    case ExprKind::Float: return a.float_value == b.float_value;
    case ExprKind::Bool: return a.bool_value == b.bool_value;
    default: break;
  }
  return same_list(a.items, b.items, same_ptr) && same_args(a.args, b.args) && same_dims(a.dims, b.dims);
}

bool same(const FileAst& a, const FileAst& b) {
  return same_list(a.items, b.items, [](const Item& x, const Item& y) { return std::visit(SameItem{}, x, y); });
}

}  // namespace dstc::frontend
