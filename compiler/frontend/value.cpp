#include "compiler/frontend/value.h"

#include <cmath>

#include <fmt/format.h>

#include "ir/source/diagnostic_kinds.h"

namespace dstc::frontend {

std::string_view type_name(ValueType t) {
  switch (t) {
    case ValueType::Int: return "int";
    case ValueType::Float: return "float";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Symbol: return "symbol";
    case ValueType::List: return "list";
    case ValueType::Error: return "error";
  }
  return "error";
}

std::optional<ValueType> parse_type_name(std::string_view name) {
  for (ValueType t : {ValueType::Int, ValueType::Float, ValueType::Bool, ValueType::String, ValueType::Symbol}) {
    if (type_name(t) == name) return t;
  }
  return std::nullopt;
}

std::string to_string(const Value& v) {
  switch (v.type) {
    case ValueType::Int: return std::to_string(v.i);
    case ValueType::Float: return fmt::format("{}", v.f);
    case ValueType::Bool: return v.b ? "true" : "false";
    case ValueType::String: return fmt::format("\"{}\"", v.s);
    case ValueType::Symbol: return v.s;
    case ValueType::List: {
      std::string out = "[";
      for (size_t i = 0; i < v.list.size(); ++i) out += (i ? ", " : "") + to_string(v.list[i]);
      return out + "]";
    }
    case ValueType::Error: return "<error>";
  }
  return "<error>";
}

void report_wrong_type(DiagnosticEngine& diags, const Expr& e, const Value& v, std::string_view wanted,
                       std::string_view what) {
  if (!v.ok()) return;
  if (v.type == ValueType::Symbol && e.kind == ExprKind::Name) {
    diags.error(diag::kUnknownName, e.range, fmt::format("unknown name '{}' (expected {} for {})", v.s, wanted, what));
    return;
  }
  diags.error(diag::kTypeMismatch, e.range,
              fmt::format("{} must be {}, but this is {} {}", what, wanted, type_name(v.type), to_string(v)));
}

std::optional<int64_t> Evaluator::eval_int(const Expr& e, const Scope& scope, std::string_view what) {
  Value v = eval(e, scope);
  if (v.type == ValueType::Int) return v.i;
  report_wrong_type(diags_, e, v, "an integer", what);
  return std::nullopt;
}

std::optional<bool> Evaluator::eval_bool(const Expr& e, const Scope& scope, std::string_view what) {
  Value v = eval(e, scope);
  if (v.type == ValueType::Bool) return v.b;
  report_wrong_type(diags_, e, v, "true or false", what);
  return std::nullopt;
}

Value Evaluator::eval(const Expr& e, const Scope& scope) {
  switch (e.kind) {
    case ExprKind::Int: return Value::of_int(e.int_value);
    case ExprKind::Float: return Value::of_float(e.float_value);
    case ExprKind::Bool: return Value::of_bool(e.bool_value);
    case ExprKind::String: return Value::of_string(e.text);
    case ExprKind::Name: {
      if (const Scope::Binding* b = scope.find(e.text)) return b->value;
      return Value::of_symbol(e.text);
    }
    case ExprKind::List: {
      Value list;
      list.type = ValueType::List;
      for (const ExprPtr& item : e.items) {
        Value v = eval(*item, scope);
        if (!v.ok()) return Value::error();
        list.list.push_back(std::move(v));
      }
      return list;
    }
    case ExprKind::Unary: {
      Value v = eval(*e.items[0], scope);
      if (!v.ok()) return v;
      if (e.text == "not") {
        if (v.type == ValueType::Bool) return Value::of_bool(!v.b);
        report_wrong_type(diags_, *e.items[0], v, "true or false", "the operand of 'not'");
        return Value::error();
      }
      if (v.type == ValueType::Int) {
        if (v.i == INT64_MIN) {
          diags_.error(diag::kIntegerOverflow, e.range, "integer overflow in negation");
          return Value::error();
        }
        return Value::of_int(-v.i);
      }
      if (v.type == ValueType::Float) return Value::of_float(-v.f);
      report_wrong_type(diags_, *e.items[0], v, "a number", "the operand of '-'");
      return Value::error();
    }
    case ExprKind::Binary: {
      // `and`/`or` short-circuit so that `x > 0 and n / x == 2` is safe.
      Value a = eval(*e.items[0], scope);
      if (!a.ok()) return a;
      if (e.text == "and" || e.text == "or") {
        if (a.type != ValueType::Bool) {
          report_wrong_type(diags_, *e.items[0], a, "true or false", fmt::format("the operand of '{}'", e.text));
          return Value::error();
        }
        if (a.b == (e.text == "or")) return a;
        Value b = eval(*e.items[1], scope);
        if (!b.ok()) return b;
        if (b.type != ValueType::Bool) {
          report_wrong_type(diags_, *e.items[1], b, "true or false", fmt::format("the operand of '{}'", e.text));
          return Value::error();
        }
        return b;
      }
      Value b = eval(*e.items[1], scope);
      if (!b.ok()) return b;
      return binary(e, a, b);
    }
    case ExprKind::Call: return call(e, scope);
    case ExprKind::Dims:
    case ExprKind::Repeat:
      diags_.error(diag::kTypeMismatch, e.range, "a tensor or layer instance is not a value here");
      return Value::error();
  }
  return Value::error();
}

Value Evaluator::binary(const Expr& e, const Value& a, const Value& b) {
  const std::string& op = e.text;
  if (op == "==" || op == "!=") {
    bool numeric = (a.type == ValueType::Int || a.type == ValueType::Float) &&
                   (b.type == ValueType::Int || b.type == ValueType::Float);
    bool eq = numeric ? (a.type == ValueType::Int ? static_cast<double>(a.i) : a.f) ==
                            (b.type == ValueType::Int ? static_cast<double>(b.i) : b.f)
                      : a == b;
    if (numeric && a.type == ValueType::Int && b.type == ValueType::Int) eq = a.i == b.i;
    return Value::of_bool(op == "==" ? eq : !eq);
  }
  bool ints = a.type == ValueType::Int && b.type == ValueType::Int;
  bool numbers = (a.type == ValueType::Int || a.type == ValueType::Float) &&
                 (b.type == ValueType::Int || b.type == ValueType::Float);
  if (!numbers) {
    const Expr& bad = (a.type == ValueType::Int || a.type == ValueType::Float) ? *e.items[1] : *e.items[0];
    report_wrong_type(diags_, bad, (&bad == e.items[0].get()) ? a : b, "a number",
                      fmt::format("the operand of '{}'", op));
    return Value::error();
  }
  if (ints) {
    int64_t x = a.i, y = b.i, r = 0;
    if (op == "<") return Value::of_bool(x < y);
    if (op == "<=") return Value::of_bool(x <= y);
    if (op == ">") return Value::of_bool(x > y);
    if (op == ">=") return Value::of_bool(x >= y);
    bool overflow = false;
    if (op == "+") {
      overflow = __builtin_add_overflow(x, y, &r);
    } else if (op == "-") {
      overflow = __builtin_sub_overflow(x, y, &r);
    } else if (op == "*") {
      overflow = __builtin_mul_overflow(x, y, &r);
    } else {  // "/" or "%"
      if (y == 0) {
        diags_.error(diag::kBadDivision, e.range, fmt::format("division by zero ({} {} 0)", x, op));
        return Value::error();
      }
      if (x == INT64_MIN && y == -1) {
        overflow = true;
      } else if (op == "%") {
        r = x % y;
      } else if (x % y != 0) {
        diags_.error(diag::kBadDivision, e.range,
                     fmt::format("{} / {} does not divide evenly (integer '/' must be exact)", x, y));
        return Value::error();
      } else {
        r = x / y;
      }
    }
    if (overflow) {
      diags_.error(diag::kIntegerOverflow, e.range, fmt::format("integer overflow in {} {} {}", x, op, y));
      return Value::error();
    }
    return Value::of_int(r);
  }
  double x = a.type == ValueType::Int ? static_cast<double>(a.i) : a.f;
  double y = b.type == ValueType::Int ? static_cast<double>(b.i) : b.f;
  if (op == "<") return Value::of_bool(x < y);
  if (op == "<=") return Value::of_bool(x <= y);
  if (op == ">") return Value::of_bool(x > y);
  if (op == ">=") return Value::of_bool(x >= y);
  if (op == "+") return Value::of_float(x + y);
  if (op == "-") return Value::of_float(x - y);
  if (op == "*") return Value::of_float(x * y);
  if (y == 0) {
    diags_.error(diag::kBadDivision, e.range, "division by zero");
    return Value::error();
  }
  if (op == "/") return Value::of_float(x / y);
  return Value::of_float(std::fmod(x, y));
}

// Built-in functions: pow2(lo, hi), range(lo, hi[, step]) (inclusive
// lists, for search domains), min(a, b...), max(a, b...).
Value Evaluator::call(const Expr& e, const Scope& scope) {
  const Expr& callee = *e.items[0];
  std::string name = callee.kind == ExprKind::Name ? callee.text : "";
  std::vector<int64_t> ints;
  for (const Arg& a : e.args) {
    if (!a.name.empty()) {
      diags_.error(diag::kArgumentMismatch, a.name_range, fmt::format("{}() takes no named arguments", name));
      return Value::error();
    }
    auto v = eval_int(*a.value, scope, fmt::format("an argument of {}()", name));
    if (!v) return Value::error();
    ints.push_back(*v);
  }
  auto arity = [&](size_t lo, size_t hi) {
    if (ints.size() >= lo && ints.size() <= hi) return true;
    diags_.error(diag::kArgumentMismatch, e.range,
                 fmt::format("{}() takes {} arguments, {} given", name,
                             lo == hi ? std::to_string(lo) : fmt::format("{} to {}", lo, hi), ints.size()));
    return false;
  };
  // Search domains are enumerated; bound them so a typo cannot eat memory.
  constexpr int64_t kMaxListLength = 1 << 20;
  Value list;
  list.type = ValueType::List;
  if (name == "pow2") {
    if (!arity(2, 2)) return Value::error();
    if (ints[0] < 1) {
      diags_.error(diag::kTypeMismatch, e.range, "pow2(lo, hi) needs lo >= 1");
      return Value::error();
    }
    for (int64_t v = 1; v <= ints[1]; v *= 2) {
      if (v >= ints[0]) list.list.push_back(Value::of_int(v));
      if (v > INT64_MAX / 2) break;
    }
    return list;
  }
  if (name == "range") {
    if (!arity(2, 3)) return Value::error();
    int64_t step = ints.size() == 3 ? ints[2] : 1;
    if (step <= 0) {
      diags_.error(diag::kTypeMismatch, e.range, "range(lo, hi, step) needs step >= 1");
      return Value::error();
    }
    if (ints[1] >= ints[0] && (ints[1] / step - ints[0] / step) > kMaxListLength) {
      diags_.error(diag::kTypeMismatch, e.range, fmt::format("range has more than {} values", kMaxListLength));
      return Value::error();
    }
    for (int64_t v = ints[0]; v <= ints[1]; v += step) {
      list.list.push_back(Value::of_int(v));
      if (v > INT64_MAX - step) break;
    }
    return list;
  }
  if (name == "min" || name == "max") {
    if (ints.empty()) {
      arity(1, SIZE_MAX);
      return Value::error();
    }
    int64_t r = ints[0];
    for (int64_t v : ints) r = name == "min" ? std::min(r, v) : std::max(r, v);
    return Value::of_int(r);
  }
  diags_.error(diag::kUnknownName, callee.range,
               name.empty() ? std::string("only a name can be called here")
                            : fmt::format("unknown function '{}' (functions: pow2, range, min, max)", name));
  return Value::error();
}

}  // namespace dstc::frontend
