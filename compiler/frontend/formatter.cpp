#include "compiler/frontend/formatter.h"

#include <fmt/format.h>

namespace dstc::frontend {
namespace {

// Binding strength of each expression form, loosest first.
enum Prec { kOr = 1, kAnd, kNot, kCmp, kAdd, kMul, kUnary, kPostfix };

int precedence(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Binary:
      if (e.text == "or") return kOr;
      if (e.text == "and") return kAnd;
      if (e.text == "+" || e.text == "-") return kAdd;
      if (e.text == "*" || e.text == "/" || e.text == "%") return kMul;
      return kCmp;
    case ExprKind::Unary: return e.text == "not" ? kNot : kUnary;
    case ExprKind::Int: return e.int_value < 0 ? kUnary : kPostfix;
    case ExprKind::Float: return e.float_value < 0 ? kUnary : kPostfix;
    case ExprKind::Repeat: return kUnary;
    default: return kPostfix;
  }
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string float_text(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string expr(const Expr& e);

std::string operand(const Expr& e, int min_prec) {
  std::string s = expr(e);
  return precedence(e) < min_prec ? "(" + s + ")" : s;
}

std::string args(const std::vector<Arg>& list) {
  std::string out = "(";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    if (!list[i].name.empty()) out += list[i].name + " = ";
    out += expr(*list[i].value);
  }
  return out + ")";
}

std::string dims(const std::vector<DimItem>& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    if (list[i].ellipsis) {
      out += "...";
    } else {
      out += list[i].name;
      if (list[i].size) out += ": " + expr(*list[i].size);
    }
  }
  return out + "]";
}

std::string expr(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Int: return std::to_string(e.int_value);
    case ExprKind::Float: return float_text(e.float_value);
    case ExprKind::String: return quote(e.text);
    case ExprKind::Bool: return e.bool_value ? "true" : "false";
    case ExprKind::Name: return e.text;
    case ExprKind::List: {
      std::string out = "[";
      for (size_t i = 0; i < e.items.size(); ++i) out += (i ? ", " : "") + expr(*e.items[i]);
      return out + "]";
    }
    case ExprKind::Unary:
      return e.text == "not" ? "not " + operand(*e.items[0], kNot) : "-" + operand(*e.items[0], kUnary);
    case ExprKind::Binary: {
      int p = precedence(e);
      // Comparisons do not chain; the others associate to the left.
      int left = p == kCmp ? kCmp + 1 : p;
      return operand(*e.items[0], left) + " " + e.text + " " + operand(*e.items[1], p + 1);
    }
    case ExprKind::Call: return operand(*e.items[0], kPostfix) + args(e.args);
    case ExprKind::Dims: return operand(*e.items[0], kPostfix) + dims(e.dims);
    case ExprKind::Repeat: return "repeat(" + expr(*e.items[0]) + ") " + operand(*e.items[1], kPostfix);
  }
  return "";
}

std::string params(const std::vector<ParamDecl>& list) {
  std::string out = "(";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    out += list[i].name;
    if (!list[i].type.empty()) out += ": " + list[i].type;
    if (list[i].default_value) out += " = " + expr(*list[i].default_value);
  }
  return out + ")";
}

std::string selector(const Selector& s) {
  std::string out;
  for (size_t i = 0; i < s.segments.size(); ++i) {
    const SelectorSegment& g = s.segments[i];
    if (i) out += ".";
    if (g.any_depth) {
      out += "**";
      continue;
    }
    out += g.any_name ? "*" : g.name;
    switch (g.index) {
      case SelectorSegment::Index::None: break;
      case SelectorSegment::Index::One: out += "[" + expr(*g.first) + "]"; break;
      case SelectorSegment::Index::Range: out += "[" + expr(*g.first) + ".." + expr(*g.last) + "]"; break;
      case SelectorSegment::Index::All: out += "[*]"; break;
    }
  }
  return out;
}

std::string sbp(const std::vector<AxisSbp>& list) {
  std::string out = "[";
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += ", ";
    out += list[i].axis + ": " + list[i].kind;
    if (list[i].has_arg) out += "(" + list[i].arg + ")";
  }
  return out + "]";
}

std::string config(const std::vector<ConfigEntry>& list) {
  if (list.empty()) return "{}";
  std::string out = "{ ";
  for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + list[i].key + " = " + expr(*list[i].value);
  return out + " }";
}

std::string cluster(const ClusterRef& c) { return " on " + quote(c.path) + (c.has_args ? " " + args(c.args) : ""); }

std::string model_ref(const ModelRef& m) { return " for " + m.name + (m.has_args ? args(m.args) : ""); }

// Emits lines with comments placed by source offset.
class Printer {
 public:
  Printer(const FileAst& ast, const SourceManager& sources) : ast_(ast), sources_(sources) {}

  std::string run() {
    bool first = true;
    bool last_was_import = false;
    for (const Item& item : ast_.items) {
      SourceRange r = item_range(item);
      bool is_import = std::holds_alternative<ImportDecl>(item);
      trailing_comments();
      if (!first && !(is_import && last_was_import)) line_blank();
      comments_before(r.begin, 0, true);
      if (last_end_line_ > 0 && line_of(r.begin) > last_end_line_ + 1) line_blank();
      blank_pending_ = false;
      first = false;
      last_was_import = is_import;
      std::visit([&](const auto& d) { print(d); }, item);
    }
    comments_before(UINT32_MAX, 0, true);
    return out_;
  }

 private:
  static SourceRange item_range(const Item& item) {
    return std::visit([](const auto& d) { return d.range; }, item);
  }

  uint32_t line_of(uint32_t offset) const { return sources_.line_col(ast_.file, offset).line; }

  void line_blank() {
    if (!out_.empty() && !out_.ends_with("\n\n")) out_ += "\n";
  }

  void emit(int indent, const std::string& text, SourceRange r) {
    out_ += std::string(static_cast<size_t>(indent) * 2, ' ') + text + "\n";
    last_end_line_ = r.valid() ? line_of(r.end > r.begin ? r.end - 1 : r.begin) : last_end_line_;
    trailing_ok_ = r.valid();
  }

  // Attaches comments that start on the line where the last statement ended.
  void trailing_comments() {
    while (next_comment_ < ast_.comments.size() && trailing_ok_) {
      const Comment& c = ast_.comments[next_comment_];
      if (line_of(c.range.begin) != last_end_line_ || c.text.find('\n') != std::string::npos) return;
      out_.pop_back();
      out_ += " " + c.text + "\n";
      ++next_comment_;
    }
  }

  // Emits comments that start before `offset`: one on the line where the
  // last statement ended stays on that line; others get their own lines,
  // after a blank line where the source had one.
  void comments_before(uint32_t offset, int indent, bool allow_blank) {
    while (next_comment_ < ast_.comments.size() && ast_.comments[next_comment_].range.begin < offset) {
      const Comment& c = ast_.comments[next_comment_++];
      uint32_t start = line_of(c.range.begin);
      bool single_line = c.text.find('\n') == std::string::npos;
      if (trailing_ok_ && start == last_end_line_ && single_line && !out_.empty()) {
        out_.pop_back();
        out_ += " " + c.text + "\n";
        continue;
      }
      if (allow_blank && last_end_line_ > 0 && start > last_end_line_ + 1) {
        line_blank();
        blank_pending_ = true;
      }
      emit(indent, c.text, c.range);
      trailing_ok_ = false;
    }
  }

  // Before a statement in a body: its comments, and one blank line where
  // the source had any.
  void before(SourceRange r, int indent) {
    comments_before(r.begin, indent, true);
    if (last_end_line_ > 0 && line_of(r.begin) > last_end_line_ + 1 && !blank_pending_) line_blank();
    blank_pending_ = false;
  }

  void close(uint32_t end, int indent, const std::string& text) {
    comments_before(end > 0 ? end - 1 : 0, indent + 1, true);
    emit(indent, text, {ast_.file, end > 0 ? end - 1 : 0, end});
  }

  void print(const ImportDecl& d) { emit(0, "import " + quote(d.path), d.range); }

  void print(const ComponentDecl& d) {
    std::string kw = d.kind == ComponentKind::Layer ? "layer" : d.kind == ComponentKind::Module ? "module" : "model";
    emit(0, kw + " " + d.name + (d.has_param_list ? params(d.params) : "") + " {", d.name_range);
    body(d.body, 1, true);
    close(d.range.end, 0, "}");
  }

  void body(const std::vector<Stmt>& stmts, int indent, bool first_in_block) {
    for (const Stmt& s : stmts) {
      if (first_in_block) {
        comments_before(s.range.begin, indent, false);
        first_in_block = false;
      } else {
        before(s.range, indent);
      }
      stmt(s, indent);
    }
  }

  void stmt(const Stmt& s, int indent) {
    switch (s.kind) {
      case StmtKind::Input:
      case StmtKind::Param:
      case StmtKind::Buffer:
        emit(indent,
             std::string(s.kind == StmtKind::Input   ? "input "
                         : s.kind == StmtKind::Param ? "param "
                                                     : "buffer ") +
                 s.name + dims(s.dims) + (s.dtype.empty() ? "" : " : " + s.dtype),
             s.range);
        break;
      case StmtKind::Let: emit(indent, "let " + s.name + " = " + expr(*s.value), s.range); break;
      case StmtKind::Assign:
        emit(indent, s.name + (s.has_dims ? dims(s.dims) : "") + " = " + expr(*s.value), s.range);
        break;
      case StmtKind::Output: emit(indent, "output " + s.name, s.range); break;
      case StmtKind::If:
        for (size_t i = 0; i < s.branches.size(); ++i) {
          const Branch& b = s.branches[i];
          if (i == 0) {
            emit(indent, "if " + expr(*b.condition) + " {", b.condition->range);
          } else {
            close_inline(b.range.begin, indent, "} else if " + expr(*b.condition) + " {", b.condition->range);
          }
          body(b.body, indent + 1, true);
        }
        if (s.has_else) {
          close_inline(s.else_range.begin, indent, "} else {", s.else_range);
          body(s.else_body, indent + 1, true);
        }
        close(s.range.end, indent, "}");
        break;
    }
  }

  void close_inline(uint32_t at, int indent, const std::string& text, SourceRange r) {
    comments_before(at, indent + 1, true);
    emit(indent, text, {r.file, r.begin, r.begin + 1});
  }

  void print(const StrategyDecl& d) {
    std::string head = "strategy " + d.name + (d.has_param_list ? params(d.params) : "");
    if (d.has_model) head += model_ref(d.model);
    if (d.has_cluster) head += cluster(d.cluster);
    emit(0, head + " {", d.name_range);
    strategy_body(d.body, 1);
    close(d.range.end, 0, "}");
  }

  void strategy_body(const std::vector<StrategyStmt>& stmts, int indent) {
    bool first = true;
    for (const StrategyStmt& s : stmts) {
      if (first) {
        comments_before(s.range.begin, indent, false);
        first = false;
      } else {
        before(s.range, indent);
      }
      strategy_stmt(s, indent);
    }
  }

  void strategy_stmt(const StrategyStmt& s, int indent) {
    std::string sel = s.selectors.empty() ? "" : selector(s.selectors[0]);
    switch (s.kind) {
      case StrategyStmtKind::Mesh: {
        std::string text = "mesh [";
        for (size_t i = 0; i < s.axes.size(); ++i)
          text += (i ? ", " : "") + s.axes[i].name + ": " + expr(*s.axes[i].size);
        emit(indent, text + "]", s.range);
        break;
      }
      case StrategyStmtKind::Train: emit(indent, "train " + config(s.entries), s.range); break;
      case StrategyStmtKind::Inference: emit(indent, "inference " + config(s.entries), s.range); break;
      case StrategyStmtKind::Schedule:
        emit(indent, (s.has_selector ? sel + " " : "") + "schedule " + config(s.entries), s.range);
        break;
      case StrategyStmtKind::Pipeline: emit(indent, "pipeline " + sel + " over " + s.name, s.range); break;
      case StrategyStmtKind::PipelineStages: {
        emit(indent, "pipeline over " + s.name + " {", s.name_range);
        bool first = true;
        for (const StageDecl& st : s.stages) {
          if (first) {
            comments_before(st.range.begin, indent + 1, false);
            first = false;
          } else {
            before(st.range, indent + 1);
          }
          std::string text = expr(*st.index) + ":";
          for (size_t i = 0; i < st.members.size(); ++i) text += (i ? ", " : " ") + selector(st.members[i]);
          emit(indent + 1, text, st.range);
        }
        close(s.range.end, indent, "}");
        break;
      }
      case StrategyStmtKind::DefaultCompute: emit(indent, "default compute " + sbp(s.sbp), s.range); break;
      case StrategyStmtKind::Compute: emit(indent, sel + " compute " + sbp(s.sbp), s.range); break;
      case StrategyStmtKind::Memory: {
        std::string roles;
        for (size_t i = 0; i < s.roles.size(); ++i) roles += (i ? ", " : "") + s.roles[i];
        emit(indent, sel + " memory" + (roles.empty() ? "" : "(" + roles + ")") + " " + sbp(s.sbp), s.range);
        break;
      }
      case StrategyStmtKind::Tie: {
        std::string text = "tie ";
        for (size_t i = 0; i < s.selectors.size(); ++i) text += (i ? ", " : "") + selector(s.selectors[i]);
        emit(indent, text + " " + s.name, s.range);
        break;
      }
      case StrategyStmtKind::Use: emit(indent, "use " + s.name + args(s.args), s.range); break;
      case StrategyStmtKind::Let: emit(indent, "let " + s.name + " = " + expr(*s.value), s.range); break;
      case StrategyStmtKind::If:
        for (size_t i = 0; i < s.branches.size(); ++i) {
          const StrategyBranch& b = s.branches[i];
          if (i == 0) {
            emit(indent, "if " + expr(*b.condition) + " {", b.condition->range);
          } else {
            close_inline(b.range.begin, indent, "} else if " + expr(*b.condition) + " {", b.condition->range);
          }
          strategy_body(b.body, indent + 1);
        }
        if (s.has_else) {
          uint32_t else_at = s.else_body.empty() ? s.range.end - 1 : s.else_body.front().range.begin;
          close_inline(else_at, indent, "} else {", {s.range.file, else_at, else_at + 1});
          strategy_body(s.else_body, indent + 1);
        }
        close(s.range.end, indent, "}");
        break;
    }
  }

  void print(const SearchDecl& d) {
    std::string head = "search " + d.name;
    if (d.has_model) head += model_ref(d.model);
    if (d.has_cluster) head += cluster(d.cluster);
    emit(0, head + " {", d.name_range);
    bool first = true;
    for (const SearchStmt& s : d.body) {
      if (first) {
        comments_before(s.range.begin, 1, false);
        first = false;
      } else {
        before(s.range, 1);
      }
      switch (s.kind) {
        case SearchStmtKind::Vary: {
          std::string text = "vary ";
          for (size_t i = 0; i < s.vary.size(); ++i)
            text += (i ? ", " : "") + s.vary[i].name + " in " + expr(*s.vary[i].domain);
          emit(1, text, s.range);
          break;
        }
        case SearchStmtKind::Where: emit(1, "where " + expr(*s.value), s.range); break;
        case SearchStmtKind::Try: emit(1, "try " + s.name + args(s.args), s.range); break;
        case SearchStmtKind::Let: emit(1, "let " + s.name + " = " + expr(*s.value), s.range); break;
      }
    }
    close(d.range.end, 0, "}");
  }

  const FileAst& ast_;
  const SourceManager& sources_;
  std::string out_;
  size_t next_comment_ = 0;
  uint32_t last_end_line_ = 0;
  bool trailing_ok_ = false;
  bool blank_pending_ = false;
};

}  // namespace

std::string format_file(const FileAst& ast, const SourceManager& sources) { return Printer(ast, sources).run(); }

}  // namespace dstc::frontend
