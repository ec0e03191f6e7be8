// The .dstrat abstract syntax tree: what the parser builds from ANTLR's parse
// tree and what every later front-end step reads. Plain structs that own
// their children; every node has the source range it came from.
// `same(a, b)` compares two trees structurally, ignoring source ranges (the
// formatter's test: formatting does not change meaning).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ir/source/source_manager.h"

namespace dstc::frontend {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// A named argument (`bias = false`) or a positional one (empty name).
struct Arg {
  std::string name;
  SourceRange name_range;
  ExprPtr value;
};

// One entry of a dim list: `...`, `h` or `h: hidden`.
struct DimItem {
  bool ellipsis = false;
  std::string name;
  ExprPtr size;  // null when not given
  SourceRange range;
};

enum class ExprKind {
  Int,     // int_value
  Float,   // float_value
  String,  // text (unescaped)
  Bool,    // bool_value
  Name,    // text: a parameter, tensor, component, op or symbol
  List,    // items
  Unary,   // op ("-" or "not"), items[0]
  Binary,  // op, items[0], items[1]
  Call,    // items[0] is the callee, args
  Dims,    // items[0] with a dim list: `x[b, s, h]`
  Repeat,  // `repeat(items[0]) items[1]`
};

struct Expr {
  ExprKind kind = ExprKind::Int;
  SourceRange range;
  int64_t int_value = 0;
  double float_value = 0;
  bool bool_value = false;
  std::string text;  // Name, String; the operator of Unary and Binary
  std::vector<ExprPtr> items;
  std::vector<Arg> args;      // Call
  std::vector<DimItem> dims;  // Dims
};

// `name: type = default` in a parameter list.
struct ParamDecl {
  std::string name;
  SourceRange name_range;
  std::string type;  // "" when inferred from the default
  SourceRange type_range;
  ExprPtr default_value;  // null when required
};

// ---- layer, module and model bodies ----

enum class StmtKind {
  Input,   // input name[dims] : dtype
  Param,   // param name[dims] : dtype
  Buffer,  // buffer name[dims] : dtype (stored with the weights, not trained)
  Let,     // let name = value
  Assign,  // name[dims] = value
  Output,  // output name
  If,      // if c { } else if c { } else { }
};

struct Stmt;
struct Branch {
  ExprPtr condition;
  std::vector<Stmt> body;
  SourceRange range;  // of the whole branch, through its closing brace
};

struct Stmt {
  StmtKind kind = StmtKind::Let;
  SourceRange range;
  std::string name;
  SourceRange name_range;
  bool has_dims = false;
  std::vector<DimItem> dims;
  std::string dtype;  // Input, Param: "" when not given
  SourceRange dtype_range;
  ExprPtr value;                 // Let, Assign
  std::vector<Branch> branches;  // If
  std::vector<Stmt> else_body;   // If
  bool has_else = false;
  SourceRange else_range;
};

enum class ComponentKind { Layer, Module, Model };

struct ComponentDecl {
  ComponentKind kind = ComponentKind::Layer;
  std::string name;
  SourceRange name_range;
  SourceRange range;
  std::vector<ParamDecl> params;
  bool has_param_list = false;
  std::vector<Stmt> body;
};

// ---- strategies ----

// One segment of a selector: `blocks`, `blocks[3]`, `blocks[0..5]`,
// `blocks[*]`, `*`, `**`.
struct SelectorSegment {
  enum class Index { None, One, Range, All };
  bool any_name = false;   // `*`
  bool any_depth = false;  // `**`
  std::string name;
  Index index = Index::None;
  ExprPtr first, last;  // One: first; Range: first..last (inclusive)
  SourceRange range;
};

struct Selector {
  std::vector<SelectorSegment> segments;
  SourceRange range;
};

// `axis: S(dim)`, `axis: S(0)`, `axis: B`, `axis: P`, `axis: P(max)`.
struct AxisSbp {
  std::string axis;
  SourceRange axis_range;
  std::string kind;  // as written: S, B or P (checked later)
  SourceRange kind_range;
  bool has_arg = false;
  std::string arg;  // the dim name, index digits or reduction
  bool arg_is_int = false;
  SourceRange arg_range;
};

struct ConfigEntry {
  std::string key;
  SourceRange key_range;
  ExprPtr value;
};

struct StageDecl {
  ExprPtr index;
  std::vector<Selector> members;
  SourceRange range;
};

struct ClusterRef {
  std::string path;  // as written, unescaped
  SourceRange range;
  std::vector<Arg> args;  // `(nodes = 128)`
  bool has_args = false;
};

enum class StrategyStmtKind {
  Mesh,            // axes
  Train,           // entries
  Inference,       // entries
  Schedule,        // selector (optional), entries
  Pipeline,        // selectors[0] over axis
  PipelineStages,  // over axis { stages }
  DefaultCompute,  // sbp
  Compute,         // selectors[0] compute sbp
  Memory,          // selectors[0] memory(roles) sbp
  Tie,             // selectors, mode
  Use,             // name(args)
  Let,             // name = value
  If,              // branches, else
};

struct MeshAxisDecl {
  std::string name;
  SourceRange name_range;
  ExprPtr size;
};

struct StrategyStmt;
struct StrategyBranch {
  ExprPtr condition;
  std::vector<StrategyStmt> body;
  SourceRange range;
};

struct StrategyStmt {
  StrategyStmtKind kind = StrategyStmtKind::Let;
  SourceRange range;
  std::vector<MeshAxisDecl> axes;
  std::vector<ConfigEntry> entries;
  bool has_selector = false;
  std::vector<Selector> selectors;
  std::string name;  // Pipeline axis, Use name, Let name, Tie mode
  SourceRange name_range;
  std::vector<StageDecl> stages;
  std::vector<AxisSbp> sbp;
  std::vector<std::string> roles;  // Memory: (param, grad, optimizer)
  std::vector<SourceRange> role_ranges;
  std::vector<Arg> args;  // Use
  ExprPtr value;          // Let
  std::vector<StrategyBranch> branches;
  std::vector<StrategyStmt> else_body;
  bool has_else = false;
};

// The model a strategy or search is for: `for GPT(layers = 24)`.
struct ModelRef {
  std::string name;
  SourceRange range;
  std::vector<Arg> args;
  bool has_args = false;
};

struct StrategyDecl {
  std::string name;
  SourceRange name_range;
  SourceRange range;
  std::vector<ParamDecl> params;
  bool has_param_list = false;
  bool has_model = false;  // a strategy without `for` is a template for `use`
  ModelRef model;
  bool has_cluster = false;
  ClusterRef cluster;
  std::vector<StrategyStmt> body;
};

// ---- search spaces ----

enum class SearchStmtKind { Vary, Where, Try, Let };

struct VaryItem {
  std::string name;
  SourceRange name_range;
  ExprPtr domain;
};

struct SearchStmt {
  SearchStmtKind kind = SearchStmtKind::Vary;
  SourceRange range;
  std::vector<VaryItem> vary;
  ExprPtr value;     // Where condition, Let value
  std::string name;  // Try strategy, Let name
  SourceRange name_range;
  std::vector<Arg> args;  // Try
};

struct SearchDecl {
  std::string name;
  SourceRange name_range;
  SourceRange range;
  bool has_model = false;
  ModelRef model;
  bool has_cluster = false;
  ClusterRef cluster;
  std::vector<SearchStmt> body;
};

struct ImportDecl {
  std::string path;  // as written
  SourceRange range;
};

using Item = std::variant<ImportDecl, ComponentDecl, StrategyDecl, SearchDecl>;

// A comment as written, with where it sits (the formatter keeps comments).
struct Comment {
  std::string text;
  SourceRange range;
};

struct FileAst {
  FileId file = kNoFile;
  std::vector<Item> items;
  std::vector<Comment> comments;  // in source order
};

// Structural equality, ignoring source ranges.
bool same(const Expr& a, const Expr& b);
bool same(const FileAst& a, const FileAst& b);

}  // namespace dstc::frontend
