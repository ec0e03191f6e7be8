// Values of .dstrat parameters and expressions, and their evaluation.
//
// Integers are 64-bit and every operation is overflow-checked; `/` on
// integers must divide exactly (a size that silently rounds is a bug).
// A name that is not bound in scope evaluates to a Symbol (`adam`, `bf16`,
// `1f1b`): the context that reads the value decides whether the symbol is
// one it accepts, and otherwise reports the name as unknown.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/ast.h"
#include "ir/source/diagnostics.h"

namespace dstc::frontend {

enum class ValueType { Int, Float, Bool, String, Symbol, List, Error };

struct Value {
  ValueType type = ValueType::Error;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string s;  // String, Symbol
  std::vector<Value> list;

  static Value of_int(int64_t v) { return {ValueType::Int, v, 0, false, {}, {}}; }
  static Value of_float(double v) { return {ValueType::Float, 0, v, false, {}, {}}; }
  static Value of_bool(bool v) { return {ValueType::Bool, 0, 0, v, {}, {}}; }
  static Value of_string(std::string v) { return {ValueType::String, 0, 0, false, std::move(v), {}}; }
  static Value of_symbol(std::string v) { return {ValueType::Symbol, 0, 0, false, std::move(v), {}}; }
  static Value error() { return {}; }
  bool ok() const { return type != ValueType::Error; }
  friend bool operator==(const Value&, const Value&) = default;
};

std::string_view type_name(ValueType t);
// As it would be written in a .dstrat file: 3, 0.5, true, "s", adam, [1, 2].
std::string to_string(const Value& v);

// Parameter types a declaration may name: int, float, bool, string, symbol.
std::optional<ValueType> parse_type_name(std::string_view name);

// Names bound to values, chained to an enclosing scope.
class Scope {
 public:
  struct Binding {
    Value value;
    SourceRange declared;  // where the name was bound (for notes)
  };
  explicit Scope(const Scope* parent = nullptr) : parent_(parent) {}
  void set(const std::string& name, Value value, SourceRange declared) { names_[name] = {std::move(value), declared}; }
  const Binding* find(const std::string& name) const {
    auto it = names_.find(name);
    if (it != names_.end()) return &it->second;
    return parent_ ? parent_->find(name) : nullptr;
  }
  bool has_own(const std::string& name) const { return names_.count(name) > 0; }

 private:
  const Scope* parent_;
  std::map<std::string, Binding> names_;
};

// Evaluates expressions, reporting each error once; an expression that
// depends on an erroneous value yields Error silently (no cascades).
class Evaluator {
 public:
  explicit Evaluator(DiagnosticEngine& diags) : diags_(diags) {}
  Value eval(const Expr& e, const Scope& scope);
  // Evaluates and requires a type; Error (reported) otherwise. `what` names
  // the value in the message ("mesh axis size").
  std::optional<int64_t> eval_int(const Expr& e, const Scope& scope, std::string_view what);
  std::optional<bool> eval_bool(const Expr& e, const Scope& scope, std::string_view what);
  DiagnosticEngine& diags() { return diags_; }

 private:
  Value call(const Expr& e, const Scope& scope);
  Value binary(const Expr& e, const Value& a, const Value& b);
  DiagnosticEngine& diags_;
};

// Reports that `v` (from `e`) is not of the wanted type; for a symbol,
// that the name is unknown.
void report_wrong_type(DiagnosticEngine& diags, const Expr& e, const Value& v, std::string_view wanted,
                       std::string_view what);

}  // namespace dstc::frontend
