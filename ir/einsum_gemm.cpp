#include "ir/einsum_gemm.h"

#include <string>
#include <vector>

namespace dstc::ir {

namespace {

bool has(std::string_view s, char c) { return s.find(c) != std::string_view::npos; }

struct Terms {
  std::string_view a, b, y;
};

std::optional<Terms> split_spec(std::string_view spec) {
  size_t arrow = spec.find("->"), comma = spec.find(',');
  if (arrow == std::string_view::npos || comma == std::string_view::npos || comma > arrow) return std::nullopt;
  Terms t{spec.substr(0, comma), spec.substr(comma + 1, arrow - comma - 1), spec.substr(arrow + 2)};
  if (has(t.b, ',')) return std::nullopt;
  return t;
}

// `term` as `lead` then the blocks `first` and `second` (each in its own
// order): 0 for first-then-second, 1 for second-then-first, -1 if neither.
int block_order(std::string_view term, std::string_view lead, std::string_view first, std::string_view second) {
  if (term.substr(0, lead.size()) != lead || term.size() != lead.size() + first.size() + second.size()) return -1;
  std::string_view rest = term.substr(lead.size());
  if (rest.substr(0, first.size()) == first && rest.substr(first.size()) == second) return 0;
  if (rest.substr(0, second.size()) == second && rest.substr(second.size()) == first) return 1;
  return -1;
}

}  // namespace

std::optional<GemmPlan> plan_gemm(std::string_view spec, std::span<const int64_t> first,
                                  std::span<const int64_t> second) {
  std::optional<Terms> t = split_spec(spec);
  if (!t || t->a.size() != first.size() || t->b.size() != second.size()) return std::nullopt;
  // Letter sizes, each letter once per term.
  int64_t size[128] = {};
  auto note = [&](std::string_view term, std::span<const int64_t> shape) {
    for (size_t d = 0; d < term.size(); ++d) {
      auto c = static_cast<unsigned char>(term[d]);
      if (c >= 128 || term.find(term[d], d + 1) != std::string_view::npos) return false;
      if (size[c] != 0 && size[c] != shape[d]) return false;
      size[c] = shape[d];
    }
    return true;
  };
  if (!note(t->a, first) || !note(t->b, second)) return std::nullopt;
  for (char c : t->y)
    if (!has(t->a, c) && !has(t->b, c)) return std::nullopt;
  // Batch letters lead y; then y's letters from one operand (L), then the other's (R).
  size_t batch = 0;
  while (batch < t->y.size() && has(t->a, t->y[batch]) && has(t->b, t->y[batch])) ++batch;
  std::string_view lead = t->y.substr(0, batch), rest = t->y.substr(batch);
  size_t split = 0;
  const bool a_first = rest.empty() || has(t->a, rest[0]);
  std::string_view left_term = a_first ? t->a : t->b, right_term = a_first ? t->b : t->a;
  while (split < rest.size() && has(left_term, rest[split]) && !has(right_term, rest[split])) ++split;
  std::string_view free_l = rest.substr(0, split), free_r = rest.substr(split);
  for (char c : free_r)
    if (!has(right_term, c) || has(left_term, c)) return std::nullopt;
  // Contracted letters: in both operands, not in y, in L's order.
  std::string contracted;
  for (char c : left_term)
    if (!has(t->y, c)) {
      if (!has(right_term, c)) return std::nullopt;  // summed over one operand alone
      contracted += c;
    }
  for (char c : right_term)
    if (!has(t->y, c) && !has(left_term, c)) return std::nullopt;
  const int order_l = block_order(left_term, lead, free_l, contracted);
  const int order_r = block_order(right_term, lead, contracted, free_r);
  if (order_l < 0 || order_r < 0) return std::nullopt;
  GemmPlan plan;
  auto product = [&](std::string_view letters) {
    int64_t p = 1;
    for (char c : letters) p *= size[static_cast<unsigned char>(c)];
    return p;
  };
  plan.batch = product(lead);
  plan.m = product(free_l);
  plan.n = product(free_r);
  plan.k = product(contracted);
  plan.swapped = !a_first;
  plan.transpose_l = order_l == 1;
  plan.transpose_r = order_r == 1;
  return plan;
}

}  // namespace dstc::ir
