#include "compiler/frontend/parser.h"

#include <DstratLexer.h>
#include <DstratParser.h>
#include <antlr4-runtime.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"

namespace dstc::frontend {
namespace {

using grammar::DstratLexer;
using P = grammar::DstratParser;

// Offset of the first invalid UTF-8 byte, or nullopt.
std::optional<size_t> first_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    }
    // Overlong forms and surrogates: the runtime's decoder rejects them.
    if (n == 2 && c < 0xC2) return i;
    if (n == 3) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) return i;
    }
    if (n == 4) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90)) return i;
    }
    i += n;
  }
  return std::nullopt;
}

std::string unescape(std::string_view quoted) {
  std::string out;
  std::string_view s = quoted.substr(1, quoted.size() >= 2 ? quoted.size() - 2 : 0);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char e = s[++i];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Maps ANTLR's code point indexes to byte offsets in the file. The runtime
// drops a leading UTF-8 byte-order mark, so indexes start after it.
class OffsetMap {
 public:
  explicit OffsetMap(std::string_view text) {
    if (text.starts_with("\xEF\xBB\xBF")) base_ = 3;
    bool ascii = true;
    for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
    if (ascii) return;
    for (auto i = base_; i < text.size(); ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) byte_of_.push_back(i);
    }
    byte_of_.push_back(static_cast<uint32_t>(text.size()));
  }
  uint32_t byte(size_t code_point) const {
    if (byte_of_.empty()) return static_cast<uint32_t>(code_point) + base_;
    return byte_of_[std::min(code_point, byte_of_.size() - 1)];
  }

 private:
  uint32_t base_ = 0;
  std::vector<uint32_t> byte_of_;
};

std::string describe_token(antlr4::Token* t, const antlr4::dfa::Vocabulary& vocab) {
  if (t->getType() == antlr4::Token::EOF) return "end of file";
  std::string text = t->getText();
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  if (t->getType() == DstratLexer::ERROR_CHAR) {
    auto c = static_cast<unsigned char>(text.empty() ? 0 : text[0]);
    if (c < 0x20 || c == 0x7F) return fmt::format("control character \\x{:02x}", c);
    return fmt::format("character '{}'", text);
  }
  return fmt::format("'{}'", text);
}

// Turns ANTLR's syntax errors into diagnostics: "unexpected X; expected Y".
class SyntaxErrorListener : public antlr4::BaseErrorListener {
 public:
  SyntaxErrorListener(DiagnosticEngine& diags, FileId file, const OffsetMap& offsets)
      : diags_(diags), file_(file), offsets_(offsets) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t, size_t, const std::string& msg,
                   std::exception_ptr) override {
    if (!offending) return;
    SourceRange range = token_range(offending);
    if (!reported_.insert(range.begin).second) return;
    std::string message = "unexpected " + describe_token(offending, recognizer->getVocabulary());
    if (auto* parser = dynamic_cast<antlr4::Parser*>(recognizer)) {
      antlr4::misc::IntervalSet expected;
      try {
        expected = parser->getExpectedTokens();
      } catch (const std::exception&) {
        // No expectation available in this parser state: say only what was found.
      }
      std::vector<std::string> names;
      for (ssize_t type : expected.toList()) {
        if (type == static_cast<ssize_t>(antlr4::Token::EOF)) {
          names.push_back("end of file");
          continue;
        }
        std::string lit = parser->getVocabulary().getLiteralName(type);
        if (lit.empty()) {
          std::string sym = parser->getVocabulary().getSymbolicName(type);
          lit = sym == "ID" ? "a name" : sym == "INT" ? "an integer" : sym == "STRING" ? "a string" : sym;
        }
        names.push_back(lit);
      }
      if (!names.empty() && names.size() <= 10) {
        message += "; expected ";
        for (size_t i = 0; i < names.size(); ++i) {
          message += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
          message += names[i];
        }
      }
    } else {
      message = msg;
    }
    diags_.error(diag::kSyntaxError, range, message);
  }

  SourceRange token_range(antlr4::Token* t) const {
    if (t->getType() == antlr4::Token::EOF) {
      uint32_t at = offsets_.byte(t->getStartIndex());
      return {file_, at, at};
    }
    return {file_, offsets_.byte(t->getStartIndex()), offsets_.byte(t->getStopIndex() + 1)};
  }

 private:
  DiagnosticEngine& diags_;
  FileId file_;
  const OffsetMap& offsets_;
  std::set<uint32_t> reported_;
};

// Builds the AST from the parse tree with one typed function per rule.
class AstBuilder {
 public:
  AstBuilder(DiagnosticEngine& diags, FileId file, const OffsetMap& offsets)
      : diags_(diags), file_(file), offsets_(offsets) {}

  bool failed() const { return too_deep_; }

  FileAst program(P::ProgramContext* ctx) {
    FileAst ast;
    ast.file = file_;
    for (P::ItemContext* item : ctx->item()) {
      if (auto* imp = item->importDecl()) {
        ast.items.emplace_back(ImportDecl{unescape(imp->STRING()->getText()), range(imp)});
      } else if (auto* comp = item->componentDecl()) {
        ast.items.emplace_back(component(comp));
      } else if (auto* strat = item->strategyDecl()) {
        ast.items.emplace_back(strategy(strat));
      } else if (auto* search = item->searchDecl()) {
        ast.items.emplace_back(search_decl(search));
      }
    }
    return ast;
  }

 private:
  SourceRange range(antlr4::ParserRuleContext* ctx) const {
    uint32_t begin = offsets_.byte(ctx->getStart()->getStartIndex());
    antlr4::Token* stop = ctx->getStop();
    uint32_t end = stop && stop->getStopIndex() + 1 >= ctx->getStart()->getStartIndex()
                       ? offsets_.byte(stop->getStopIndex() + 1)
                       : begin;
    return {file_, begin, std::max(begin, end)};
  }
  SourceRange range(antlr4::tree::TerminalNode* node) const { return range(node->getSymbol()); }
  SourceRange range(antlr4::Token* t) const {
    return {file_, offsets_.byte(t->getStartIndex()), offsets_.byte(t->getStopIndex() + 1)};
  }
  SourceRange span(SourceRange a, SourceRange b) const { return {file_, a.begin, std::max(a.end, b.end)}; }

  // ---- declarations ----

  ComponentDecl component(P::ComponentDeclContext* ctx) {
    ComponentDecl d;
    switch (ctx->kind->getType()) {
      case DstratLexer::MODULE: d.kind = ComponentKind::Module; break;
      case DstratLexer::MODEL: d.kind = ComponentKind::Model; break;
      default: d.kind = ComponentKind::Layer; break;
    }
    d.name = ctx->ID()->getText();
    d.name_range = range(ctx->ID());
    d.range = range(ctx);
    if (auto* pl = ctx->paramList()) {
      d.has_param_list = true;
      d.params = params(pl);
    }
    d.body = body(ctx->body());
    return d;
  }

  std::vector<ParamDecl> params(P::ParamListContext* ctx) {
    std::vector<ParamDecl> out;
    for (P::ParamDeclContext* p : ctx->paramDecl()) {
      ParamDecl d;
      d.name = p->ID(0)->getText();
      d.name_range = range(p->ID(0));
      if (p->ID().size() > 1) {
        d.type = p->ID(1)->getText();
        d.type_range = range(p->ID(1));
      }
      if (p->expr()) d.default_value = expr(p->expr(), 0);
      out.push_back(std::move(d));
    }
    return out;
  }

  std::vector<Stmt> body(P::BodyContext* ctx) {
    std::vector<Stmt> out;
    for (P::StmtContext* s : ctx->stmt()) {
      if (!s->SEMI()) out.push_back(stmt(s));
    }
    return out;
  }

  Stmt stmt(P::StmtContext* ctx) {
    Stmt s;
    s.range = range(ctx);
    if (auto* in = ctx->inputStmt()) {
      s.kind = StmtKind::Input;
      named(s, in->ID(0));
      s.has_dims = true;
      s.dims = dims(in->dimList(), 0);
      if (in->ID().size() > 1) {
        s.dtype = in->ID(1)->getText();
        s.dtype_range = range(in->ID(1));
      }
    } else if (auto* param = ctx->paramStmt()) {
      s.kind = param->kind->getType() == P::BUFFER ? StmtKind::Buffer : StmtKind::Param;
      named(s, param->ID(0));
      s.has_dims = true;
      s.dims = dims(param->dimList(), 0);
      if (param->ID().size() > 1) {
        s.dtype = param->ID(1)->getText();
        s.dtype_range = range(param->ID(1));
      }
    } else if (auto* let = ctx->letStmt()) {
      s.kind = StmtKind::Let;
      named(s, let->ID());
      s.value = expr(let->expr(), 0);
    } else if (auto* assign = ctx->assignStmt()) {
      s.kind = StmtKind::Assign;
      named(s, assign->ID());
      if (assign->dimList()) {
        s.has_dims = true;
        s.dims = dims(assign->dimList(), 0);
      }
      s.value = expr(assign->expr(), 0);
    } else if (auto* out = ctx->outputStmt()) {
      s.kind = StmtKind::Output;
      named(s, out->ID());
    } else if (auto* ifs = ctx->ifStmt()) {
      s.kind = StmtKind::If;
      std::vector<P::BodyContext*> bodies = ifs->body();
      std::vector<P::ExprContext*> conditions = ifs->expr();
      for (size_t i = 0; i < conditions.size(); ++i) {
        Branch b;
        b.condition = expr(conditions[i], 0);
        b.body = body(bodies[i]);
        b.range = span(range(conditions[i]), range(bodies[i]));
        s.branches.push_back(std::move(b));
      }
      if (bodies.size() > conditions.size()) {
        s.has_else = true;
        s.else_body = body(bodies.back());
        s.else_range = range(bodies.back());
      }
    }
    return s;
  }

  void named(Stmt& s, antlr4::tree::TerminalNode* id) {
    s.name = id->getText();
    s.name_range = range(id);
  }

  std::vector<DimItem> dims(P::DimListContext* ctx, int depth) {
    std::vector<DimItem> out;
    for (P::DimItemContext* d : ctx->dimItem()) {
      DimItem item;
      item.range = range(d);
      if (d->ELLIPSIS()) {
        item.ellipsis = true;
      } else {
        item.name = d->ID()->getText();
        if (d->expr()) item.size = expr(d->expr(), depth + 1);
      }
      out.push_back(std::move(item));
    }
    return out;
  }

  // ---- strategies ----

  StrategyDecl strategy(P::StrategyDeclContext* ctx) {
    StrategyDecl d;
    d.name = ctx->ID(0)->getText();
    d.name_range = range(ctx->ID(0));
    d.range = range(ctx);
    if (auto* pl = ctx->paramList()) {
      d.has_param_list = true;
      d.params = params(pl);
    }
    if (ctx->FOR()) {
      d.has_model = true;
      d.model = model_ref(ctx->ID(1), ctx->argList());
    }
    if (auto* c = ctx->clusterRef()) {
      d.has_cluster = true;
      d.cluster = cluster(c);
    }
    d.body = strategy_body(ctx->strategyBody());
    return d;
  }

  ModelRef model_ref(antlr4::tree::TerminalNode* id, P::ArgListContext* args) {
    ModelRef m;
    m.name = id->getText();
    m.range = range(id);
    if (args) {
      m.has_args = true;
      m.args = arg_list(args, 0);
    }
    return m;
  }

  ClusterRef cluster(P::ClusterRefContext* ctx) {
    ClusterRef c;
    c.path = unescape(ctx->STRING()->getText());
    c.range = range(ctx->STRING());
    if (ctx->argList()) {
      c.has_args = true;
      c.args = arg_list(ctx->argList(), 0);
    }
    return c;
  }

  std::vector<StrategyStmt> strategy_body(P::StrategyBodyContext* ctx) {
    std::vector<StrategyStmt> out;
    for (P::StrategyStmtContext* s : ctx->strategyStmt()) {
      if (!s->SEMI()) out.push_back(strategy_stmt(s));
    }
    return out;
  }

  StrategyStmt strategy_stmt(P::StrategyStmtContext* ctx) {
    StrategyStmt s;
    s.range = range(ctx);
    if (auto* mesh = ctx->meshStmt()) {
      s.kind = StrategyStmtKind::Mesh;
      for (P::MeshAxisContext* a : mesh->meshAxis()) {
        s.axes.push_back({a->ID()->getText(), range(a->ID()), expr(a->expr(), 0)});
      }
    } else if (auto* run = ctx->runStmt()) {
      s.kind = run->kind->getType() == DstratLexer::TRAIN ? StrategyStmtKind::Train : StrategyStmtKind::Inference;
      s.entries = config(run->configBlock());
    } else if (auto* sched = ctx->scheduleStmt()) {
      s.kind = StrategyStmtKind::Schedule;
      s.entries = config(sched->configBlock());
    } else if (auto* pipe = ctx->pipelineStmt()) {
      s.name = pipe->ID()->getText();
      s.name_range = range(pipe->ID());
      if (pipe->selector()) {
        s.kind = StrategyStmtKind::Pipeline;
        s.selectors.push_back(selector(pipe->selector()));
      } else {
        s.kind = StrategyStmtKind::PipelineStages;
        for (P::StageDeclContext* st : pipe->stageDecl()) {
          StageDecl stage;
          stage.index = expr(st->expr(), 0);
          for (P::SelectorContext* sel : st->selector()) stage.members.push_back(selector(sel));
          stage.range = range(st);
          s.stages.push_back(std::move(stage));
        }
      }
    } else if (auto* def = ctx->defaultStmt()) {
      s.kind = StrategyStmtKind::DefaultCompute;
      s.sbp = sbp_list(def->sbpList());
    } else if (auto* sel = ctx->selectorStmt()) {
      s.has_selector = true;
      s.selectors.push_back(selector(sel->selector()));
      if (sel->COMPUTE()) {
        s.kind = StrategyStmtKind::Compute;
        s.sbp = sbp_list(sel->sbpList());
      } else if (sel->MEMORY()) {
        s.kind = StrategyStmtKind::Memory;
        for (P::MemoryRoleContext* role : sel->memoryRole()) {
          s.roles.push_back(role->getText());
          s.role_ranges.push_back(range(role));
        }
        s.sbp = sbp_list(sel->sbpList());
      } else {
        s.kind = StrategyStmtKind::Schedule;
        s.entries = config(sel->configBlock());
      }
    } else if (auto* tie = ctx->tieStmt()) {
      s.kind = StrategyStmtKind::Tie;
      for (P::SelectorContext* t : tie->selector()) s.selectors.push_back(selector(t));
      s.name = tie->ID()->getText();
      s.name_range = range(tie->ID());
    } else if (auto* use = ctx->useStmt()) {
      s.kind = StrategyStmtKind::Use;
      s.name = use->ID()->getText();
      s.name_range = range(use->ID());
      s.args = arg_list(use->argList(), 0);
    } else if (auto* let = ctx->letStmt()) {
      s.kind = StrategyStmtKind::Let;
      s.name = let->ID()->getText();
      s.name_range = range(let->ID());
      s.value = expr(let->expr(), 0);
    } else if (auto* ifs = ctx->strategyIfStmt()) {
      s.kind = StrategyStmtKind::If;
      std::vector<P::StrategyBodyContext*> bodies = ifs->strategyBody();
      std::vector<P::ExprContext*> conditions = ifs->expr();
      for (size_t i = 0; i < conditions.size(); ++i) {
        StrategyBranch b;
        b.condition = expr(conditions[i], 0);
        b.body = strategy_body(bodies[i]);
        b.range = span(range(conditions[i]), range(bodies[i]));
        s.branches.push_back(std::move(b));
      }
      if (bodies.size() > conditions.size()) {
        s.has_else = true;
        s.else_body = strategy_body(bodies.back());
      }
    }
    return s;
  }

  std::vector<ConfigEntry> config(P::ConfigBlockContext* ctx) {
    std::vector<ConfigEntry> out;
    for (P::ConfigEntryContext* e : ctx->configEntry()) {
      out.push_back({e->ID()->getText(), range(e->ID()), expr(e->expr(), 0)});
    }
    return out;
  }

  std::vector<AxisSbp> sbp_list(P::SbpListContext* ctx) {
    std::vector<AxisSbp> out;
    for (P::AxisSbpContext* a : ctx->axisSbp()) {
      AxisSbp s;
      s.axis = a->ID(0)->getText();
      s.axis_range = range(a->ID(0));
      s.kind = a->ID(1)->getText();
      s.kind_range = range(a->ID(1));
      if (a->LPAREN()) {
        s.has_arg = true;
        antlr4::tree::TerminalNode* arg = a->INT() ? a->INT() : a->ID(2);
        s.arg_is_int = a->INT() != nullptr;
        s.arg = arg->getText();
        s.arg_range = range(arg);
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  Selector selector(P::SelectorContext* ctx) {
    Selector sel;
    sel.range = range(ctx);
    for (P::SelectorSegmentContext* seg : ctx->selectorSegment()) {
      SelectorSegment s;
      s.range = range(seg);
      if (seg->STARSTAR()) {
        s.any_depth = true;
      } else {
        s.any_name = seg->STAR() != nullptr;
        if (seg->ID()) s.name = seg->ID()->getText();
        if (auto* idx = seg->selectorIndex()) {
          if (idx->STAR()) {
            s.index = SelectorSegment::Index::All;
          } else {
            s.first = expr(idx->expr(0), 0);
            if (idx->DOTDOT()) {
              s.index = SelectorSegment::Index::Range;
              s.last = expr(idx->expr(1), 0);
            } else {
              s.index = SelectorSegment::Index::One;
            }
          }
        }
      }
      sel.segments.push_back(std::move(s));
    }
    return sel;
  }

  // ---- search ----

  SearchDecl search_decl(P::SearchDeclContext* ctx) {
    SearchDecl d;
    d.name = ctx->ID(0)->getText();
    d.name_range = range(ctx->ID(0));
    d.range = range(ctx);
    if (ctx->FOR()) {
      d.has_model = true;
      d.model = model_ref(ctx->ID(1), ctx->argList());
    }
    if (auto* c = ctx->clusterRef()) {
      d.has_cluster = true;
      d.cluster = cluster(c);
    }
    for (P::SearchStmtContext* st : ctx->searchStmt()) {
      if (st->SEMI()) continue;
      SearchStmt s;
      s.range = range(st);
      if (st->VARY()) {
        s.kind = SearchStmtKind::Vary;
        for (P::VaryItemContext* v : st->varyItem()) {
          s.vary.push_back({v->ID()->getText(), range(v->ID()), expr(v->expr(), 0)});
        }
      } else if (st->WHERE()) {
        s.kind = SearchStmtKind::Where;
        s.value = expr(st->expr(), 0);
      } else if (st->TRY()) {
        s.kind = SearchStmtKind::Try;
        s.name = st->ID()->getText();
        s.name_range = range(st->ID());
        s.args = arg_list(st->argList(), 0);
      } else if (auto* let = st->letStmt()) {
        s.kind = SearchStmtKind::Let;
        s.name = let->ID()->getText();
        s.name_range = range(let->ID());
        s.value = expr(let->expr(), 0);
      }
      d.body.push_back(std::move(s));
    }
    return d;
  }

  // ---- expressions ----

  std::vector<Arg> arg_list(P::ArgListContext* ctx, int depth) {
    std::vector<Arg> out;
    for (P::ArgContext* a : ctx->arg()) {
      Arg arg;
      if (a->ID()) {
        arg.name = a->ID()->getText();
        arg.name_range = range(a->ID());
      }
      arg.value = expr(a->expr(), depth + 1);
      out.push_back(std::move(arg));
    }
    return out;
  }

  // Past the depth limit, reports once and builds a placeholder literal so
  // that the builder's recursion stays bounded.
  bool too_deep(int depth, SourceRange at) {
    if (depth <= kMaxExprDepth) return false;
    if (!too_deep_) {
      too_deep_ = true;
      diags_.error(diag::kNestingTooDeep, at, fmt::format("expression nested more than {} levels deep", kMaxExprDepth));
    }
    return true;
  }

  ExprPtr leaf(SourceRange at) {
    auto e = std::make_unique<Expr>();
    e->range = at;
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr lhs, ExprPtr rhs) {
    auto e = std::make_unique<Expr>();
    e->kind = ExprKind::Binary;
    e->text = std::move(op);
    e->range = span(lhs->range, rhs->range);
    e->items.push_back(std::move(lhs));
    e->items.push_back(std::move(rhs));
    return e;
  }

  // Folds `a op b op c` left to right; each fold is one level deeper.
  template <typename Ctx, typename Next>
  ExprPtr chain(const std::vector<Ctx*>& operands, const std::vector<std::string>& ops, int depth, Next next) {
    int levels = static_cast<int>(operands.size()) - 1;
    if (too_deep(depth + levels, range(operands.front()))) return leaf(range(operands.front()));
    ExprPtr acc = next(operands[0], depth + levels);
    for (size_t i = 1; i < operands.size(); ++i) {
      acc = binary(ops[i - 1], std::move(acc), next(operands[i], depth + levels));
    }
    return acc;
  }

  ExprPtr expr(P::ExprContext* ctx, int depth) {
    std::vector<std::string> ops(ctx->andExpr().size(), "or");
    return chain(ctx->andExpr(), ops, depth, [this](P::AndExprContext* c, int d) { return and_expr(c, d); });
  }

  ExprPtr and_expr(P::AndExprContext* ctx, int depth) {
    std::vector<std::string> ops(ctx->notExpr().size(), "and");
    return chain(ctx->notExpr(), ops, depth, [this](P::NotExprContext* c, int d) { return not_expr(c, d); });
  }

  ExprPtr not_expr(P::NotExprContext* ctx, int depth) {
    size_t nots = ctx->NOT().size();
    if (too_deep(depth + static_cast<int>(nots), range(ctx))) return leaf(range(ctx));
    ExprPtr e = cmp_expr(ctx->cmpExpr(), depth + static_cast<int>(nots));
    for (size_t i = 0; i < nots; ++i) e = unary("not", std::move(e), range(ctx->NOT(nots - 1 - i)));
    return e;
  }

  ExprPtr unary(std::string op, ExprPtr operand, SourceRange op_range) {
    auto e = std::make_unique<Expr>();
    e->kind = ExprKind::Unary;
    e->text = std::move(op);
    e->range = span(op_range, operand->range);
    e->items.push_back(std::move(operand));
    return e;
  }

  ExprPtr cmp_expr(P::CmpExprContext* ctx, int depth) {
    std::vector<std::string> ops;
    if (ctx->op) ops.push_back(ctx->op->getText());
    return chain(ctx->addExpr(), ops, depth, [this](P::AddExprContext* c, int d) { return add_expr(c, d); });
  }

  ExprPtr add_expr(P::AddExprContext* ctx, int depth) {
    std::vector<std::string> ops;
    for (antlr4::Token* t : ctx->op) ops.push_back(t->getText());
    return chain(ctx->mulExpr(), ops, depth, [this](P::MulExprContext* c, int d) { return mul_expr(c, d); });
  }

  ExprPtr mul_expr(P::MulExprContext* ctx, int depth) {
    std::vector<std::string> ops;
    for (antlr4::Token* t : ctx->op) ops.push_back(t->getText());
    return chain(ctx->unaryExpr(), ops, depth, [this](P::UnaryExprContext* c, int d) { return unary_expr(c, d); });
  }

  ExprPtr unary_expr(P::UnaryExprContext* ctx, int depth) {
    size_t minus = ctx->MINUS().size();
    if (too_deep(depth + static_cast<int>(minus), range(ctx))) return leaf(range(ctx));
    // `-9223372036854775808` is one literal: the magnitude alone overflows.
    P::PrimaryContext* prim = ctx->postfixExpr()->primary();
    if (minus % 2 == 1 && ctx->postfixExpr()->children.size() == 1 && prim->INT()) {
      ExprPtr e = int_literal(prim->INT(), true);
      e->range = span(range(ctx->MINUS(minus - 1)), e->range);
      for (size_t i = 1; i < minus; ++i) e = unary("-", std::move(e), range(ctx->MINUS(minus - 1 - i)));
      return e;
    }
    ExprPtr e = postfix(ctx->postfixExpr(), depth + static_cast<int>(minus));
    for (size_t i = 0; i < minus; ++i) e = unary("-", std::move(e), range(ctx->MINUS(minus - 1 - i)));
    return e;
  }

  ExprPtr postfix(P::PostfixExprContext* ctx, int depth) {
    size_t suffixes = ctx->children.size() - 1;
    if (too_deep(depth + static_cast<int>(suffixes), range(ctx))) return leaf(range(ctx));
    ExprPtr e = primary(ctx->primary(), depth + static_cast<int>(suffixes));
    for (size_t i = 1; i < ctx->children.size(); ++i) {
      auto wrapped = std::make_unique<Expr>();
      if (auto* args = dynamic_cast<P::ArgListContext*>(ctx->children[i])) {
        wrapped->kind = ExprKind::Call;
        wrapped->args = arg_list(args, depth);
        wrapped->range = span(e->range, range(args));
      } else if (auto* dl = dynamic_cast<P::DimListContext*>(ctx->children[i])) {
        wrapped->kind = ExprKind::Dims;
        wrapped->dims = dims(dl, depth);
        wrapped->range = span(e->range, range(dl));
      } else {
        continue;
      }
      wrapped->items.push_back(std::move(e));
      e = std::move(wrapped);
    }
    return e;
  }

  ExprPtr int_literal(antlr4::tree::TerminalNode* node, bool negative) {
    auto e = leaf(range(node));
    e->kind = ExprKind::Int;
    std::string digits = (negative ? "-" : "") + node->getText();
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(digits.c_str(), &end, 10);
    if (errno == ERANGE) {
      diags_.error(diag::kIntegerOverflow, e->range, "integer literal does not fit in 64 bits");
      v = 0;
    }
    e->int_value = v;
    return e;
  }

  ExprPtr primary(P::PrimaryContext* ctx, int depth) {
    SourceRange at = range(ctx);
    if (ctx->INT()) return int_literal(ctx->INT(), false);
    auto e = leaf(at);
    if (ctx->FLOAT()) {
      e->kind = ExprKind::Float;
      e->float_value = std::strtod(ctx->FLOAT()->getText().c_str(), nullptr);
      if (e->float_value == HUGE_VAL) {
        diags_.error(diag::kIntegerOverflow, at, "floating-point literal is out of range");
        e->float_value = 0;
      }
    } else if (ctx->STRING()) {
      e->kind = ExprKind::String;
      e->text = unescape(ctx->STRING()->getText());
    } else if (ctx->TRUE() || ctx->FALSE()) {
      e->kind = ExprKind::Bool;
      e->bool_value = ctx->TRUE() != nullptr;
    } else if (ctx->ID() || ctx->SYM_1F1B() || ctx->DIGIT_WORD()) {
      e->kind = ExprKind::Name;
      e->text = ctx->getText();
    } else if (ctx->REPEAT()) {
      e->kind = ExprKind::Repeat;
      e->items.push_back(expr(ctx->expr(0), depth + 1));
      e->items.push_back(postfix(ctx->postfixExpr(), depth + 1));
    } else if (ctx->LPAREN()) {
      return expr(ctx->expr(0), depth + 1);
    } else if (ctx->LBRACK()) {
      e->kind = ExprKind::List;
      for (P::ExprContext* item : ctx->expr()) e->items.push_back(expr(item, depth + 1));
    }
    return e;
  }

  DiagnosticEngine& diags_;
  FileId file_;
  const OffsetMap& offsets_;
  bool too_deep_ = false;
};

// Checks the token stream before parsing: unterminated strings and comments,
// stray characters are left to the parser; nesting depth is bounded here.
bool prescan_tokens(const std::vector<antlr4::Token*>& tokens, FileId file, const OffsetMap& offsets,
                    DiagnosticEngine& diags, std::vector<Comment>& comments, std::string_view text) {
  bool ok = true;
  int depth = 0;
  std::vector<SourceRange> opened;
  for (antlr4::Token* t : tokens) {
    SourceRange r{file, offsets.byte(t->getStartIndex()), offsets.byte(t->getStopIndex() + 1)};
    switch (t->getType()) {
      case DstratLexer::LPAREN:
      case DstratLexer::LBRACK:
      case DstratLexer::LBRACE:
        if (++depth > kMaxNesting) {
          diags.error(diag::kNestingTooDeep, r, fmt::format("brackets nested more than {} deep", kMaxNesting));
          return false;
        }
        break;
      case DstratLexer::RPAREN:
      case DstratLexer::RBRACK:
      case DstratLexer::RBRACE: depth = std::max(0, depth - 1); break;
      case DstratLexer::UNTERMINATED_STRING:
        diags.error(diag::kUnterminated, {file, r.begin, r.begin + 1}, "string has no closing quote on its line");
        ok = false;
        break;
      case DstratLexer::BLOCK_COMMENT: {
        std::string_view body = text.substr(r.begin, r.end - r.begin);
        if (body.size() < 4 || !body.ends_with("*/")) {
          diags.error(diag::kUnterminated, {file, r.begin, r.begin + 2}, "block comment has no closing */");
          ok = false;
        }
        comments.push_back({std::string(body), r});
        break;
      }
      case DstratLexer::LINE_COMMENT:
        comments.push_back({std::string(text.substr(r.begin, r.end - r.begin)), r});
        break;
      default: break;
    }
  }
  return ok;
}

}  // namespace

std::vector<std::string> grammar_keywords() {
  std::vector<std::string> words;
  antlr4::ANTLRInputStream empty("");
  DstratLexer lexer(&empty);
  const antlr4::dfa::Vocabulary& vocab = lexer.getVocabulary();
  for (size_t type = 1; type <= vocab.getMaxTokenType(); ++type) {
    std::string lit = vocab.getLiteralName(type);
    if (lit.size() < 3 || lit.front() != '\'') continue;
    std::string word = lit.substr(1, lit.size() - 2);
    if (std::all_of(word.begin(), word.end(),
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; })) {
      words.push_back(word);
    }
  }
  return words;
}

std::optional<FileAst> parse_file(FileId file, DiagnosticEngine& diags) {
  const std::string& text = diags.sources().file(file).text;
  if (size_t nul = text.find('\0'); nul != std::string::npos) {
    uint32_t at = static_cast<uint32_t>(nul);
    diags.error(diag::kBinaryFile, {file, at, at + 1}, "file has a NUL byte: it is not a .dstrat text file");
    return std::nullopt;
  }
  if (auto bad = first_invalid_utf8(text)) {
    uint32_t at = static_cast<uint32_t>(*bad);
    diags.error(diag::kInvalidUtf8, {file, at, at + 1}, "file is not valid UTF-8 (a .dstrat file must be)");
    return std::nullopt;
  }
  OffsetMap offsets(text);
  size_t errors_before = diags.error_count();

  antlr4::ANTLRInputStream input(text);
  DstratLexer lexer(&input);
  lexer.removeErrorListeners();  // every token is valid: stray characters are ERROR_CHAR
  antlr4::CommonTokenStream tokens(&lexer);
  tokens.fill();

  std::vector<Comment> comments;
  if (!prescan_tokens(tokens.getTokens(), file, offsets, diags, comments, text)) return std::nullopt;

  P parser(&tokens);
  parser.removeErrorListeners();
  parser.setErrorHandler(std::make_shared<antlr4::BailErrorStrategy>());
  parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(antlr4::atn::PredictionMode::SLL);
  P::ProgramContext* tree = nullptr;
  try {
    tree = parser.program();
  } catch (const antlr4::ParseCancellationException&) {
    tokens.seek(0);
    parser.reset();
    SyntaxErrorListener listener(diags, file, offsets);
    parser.addErrorListener(&listener);
    parser.setErrorHandler(std::make_shared<antlr4::DefaultErrorStrategy>());
    parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(antlr4::atn::PredictionMode::LL);
    tree = parser.program();
    parser.removeErrorListeners();
  }
  if (diags.error_count() > errors_before || parser.getNumberOfSyntaxErrors() > 0) return std::nullopt;

  AstBuilder builder(diags, file, offsets);
  FileAst ast = builder.program(tree);
  if (builder.failed() || diags.error_count() > errors_before) return std::nullopt;
  ast.comments = std::move(comments);
  if (ast.items.empty()) {
    diags.error(diag::kEmptyFile, {file, 0, 0},
                "the file declares nothing (no import, layer, model, strategy or search)");
    return std::nullopt;
  }
  return ast;
}

}  // namespace dstc::frontend
