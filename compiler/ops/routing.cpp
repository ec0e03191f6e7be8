// Routing: a router's top-k selection, and the dispatch of tokens to
// experts' capacity slots and their combination back (mixture of experts).
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "compiler/ops/dims_checks.h"
#include "compiler/ops/routing_load.h"

namespace dstc::ops {
namespace {

// The dims of a and b before their last `keep_a` and `keep_b` agree.
bool same_leading(const std::vector<Dim>& a, size_t keep_a, const std::vector<Dim>& b, size_t keep_b) {
  if (a.size() < keep_a || b.size() < keep_b || a.size() - keep_a != b.size() - keep_b) return false;
  return std::equal(a.begin(), a.end() - static_cast<std::ptrdiff_t>(keep_a), b.begin());
}

}  // namespace

DimsResult top_k_dims(const DimsQuery& q, OpError& error) {
  const std::string& dim = q.attrs.dim("dim");
  if (!require_dim(q.inputs[0], dim, 0, error)) return std::nullopt;
  int64_t k = q.attrs.integer("k");
  int64_t size = find_dim(q.inputs[0], dim)->size;
  if (k < 1 || k > size) return fail(error, fmt::format("k = {} must be between 1 and {}'s size {}", k, dim, size));
  for (const char* name : {"aux_loss", "seq_aux_loss"})
    if (double aux = q.attrs.real(name); !(aux >= 0 && std::isfinite(aux)))
      return fail(error, fmt::format("{} is a load-balancing loss's coefficient, at least 0, not {}", name, aux));
  if (q.attrs.real("seq_aux_loss") > 0 && q.inputs[0].front().name == dim)
    return fail(error, fmt::format("seq_aux_loss balances each sequence, the dim before {}, which is the first", dim));
  // Node-limited routing: `groups` groups of consecutive entries, the k
  // taken from the `group_k` best (0 and 0: no groups).
  const int64_t g = q.attrs.integer("groups"), gk = q.attrs.integer("group_k");
  if (g == 0 && gk == 0) return check_declared(q.inputs[0], q.declared, error);
  if (g < 1 || size % g != 0)
    return fail(error, fmt::format("groups = {} must divide {}'s {} entries into equal groups", g, dim, size));
  if (gk < 1 || gk > g) return fail(error, fmt::format("group_k = {} must be between 1 and the {} groups", gk, g));
  if (k > gk * (size / g))
    return fail(error, fmt::format("k = {} is more than the {} kept groups of {} entries hold", k, gk, size / g));
  return check_declared(q.inputs[0], q.declared, error);
}

// x[..., s, h] and gates[..., s, e] -> [..., e, c, h], c the written slots.
DimsResult dispatch_dims(const DimsQuery& q, OpError& error) {
  const auto& x = q.inputs[0];
  const auto& gates = q.inputs[1];
  if (x.size() < 2 || !same_leading(x, 1, gates, 1))
    return fail(error,
                fmt::format("gates {} must have the tokens' dims {} but the last: x[..., s, h], gates[..., s, e]",
                            dims_text(gates), dims_text(x)),
                1);
  const Dim& e = gates.back();
  const Dim& h = x.back();
  if (int64_t k = q.attrs.integer("k"); k < 1 || k > e.size)
    return fail(error, fmt::format("k = {} experts per token must be between 1 and {}'s size {}", k, e.name, e.size));
  if (double skew = q.attrs.real("skew"); !(skew >= 0))
    return fail(error, fmt::format("the routing skew is a Zipf exponent, at least 0, not {}", skew));
  if (e.name == h.name)
    return fail(error, fmt::format("the experts' dim and the tokens' last dim are both {}", e.name), 1);
  const auto& declared = *q.declared;
  if (declared.size() != x.size() + 1)
    return fail(error, fmt::format("the output is [..., {}, slots, {}]: {} dims, written with {}", e.name, h.name,
                                   x.size() + 1, declared.size()));
  std::vector<Dim> out(x.begin(), x.end() - 2);
  const DeclaredDim& slots = declared[declared.size() - 2];
  if (find_dim(x, slots.name) || find_dim(gates, slots.name))
    return fail(error, fmt::format("the slots dim {} must be new: it is already a dim of the inputs", slots.name));
  if (!slots.size || *slots.size < 1)
    return fail(error, fmt::format("give the experts' capacity as the slots dim's size ({}: N)", slots.name), -1, true);
  out.push_back(e);
  out.push_back({slots.name, *slots.size});
  out.push_back(h);
  return check_declared(out, q.declared, error);
}

// y[..., e, c, h] and gates[..., s, e] -> [..., s, h].
DimsResult combine_dims(const DimsQuery& q, OpError& error) {
  const auto& y = q.inputs[0];
  const auto& gates = q.inputs[1];
  if (gates.size() < 2 || !same_leading(y, 3, gates, 2) || y[y.size() - 3] != gates.back())
    return fail(
        error,
        fmt::format("y {} and gates {} must be y[..., e, c, h] and gates[..., s, e]", dims_text(y), dims_text(gates)),
        1);
  if (find_dim(gates, y[y.size() - 2].name))
    return fail(error, fmt::format("the slots dim {} is also a dim of the gates", y[y.size() - 2].name), 1);
  std::vector<Dim> out(gates.begin(), gates.end() - 1);
  out.push_back(y.back());
  return check_declared(out, q.declared, error);
}

double fullest_slot_fill(const RoutingLoad& load, int64_t parts) {
  const int64_t experts = std::max<int64_t>(load.experts, 1);
  parts = std::clamp<int64_t>(parts, 1, experts);
  const bool measured = static_cast<int64_t>(load.measured.size()) == experts;
  std::vector<double> share(static_cast<size_t>(experts));
  double total = 0;
  for (int64_t z = 0; z < experts; ++z)
    total += share[static_cast<size_t>(z)] =
        measured ? load.measured[static_cast<size_t>(z)] : std::pow(z + 1.0, -load.skew);
  const int64_t per_part = experts / parts;
  // Expert i of chunk `part`: contiguous when measured, dealt round-robin by
  // popularity under the skew.
  auto expert = [&](int64_t part, int64_t i) { return measured ? part * per_part + i : i * parts + part; };
  const auto capacity = static_cast<double>(load.capacity);
  double fullest = 0;
  for (int64_t part = 0; part < parts; ++part) {
    double filled = 0;
    for (int64_t i = 0; i < per_part; ++i) {
      double tokens = static_cast<double>(load.routes) * share[static_cast<size_t>(expert(part, i))] / total;
      filled += std::min(capacity, tokens);
    }
    fullest = std::max(fullest, filled / (static_cast<double>(per_part) * capacity));
  }
  return std::clamp(fullest, 1e-6, 1.0);
}

// Tokens take slots in order along the routed dim, per micro-batch if it
// were the batch dim: micro-batching would change the routing.
LoweringRefusal routing_limit(const LoweringQuery& q) {
  const std::vector<std::string>& gates = q.inputs[1];
  if (gates[gates.size() - 2] == q.batch_dim)
    return fmt::format("routing tokens along the batch dim {}; route along a dim inside each sample (the sequence)",
                       q.batch_dim);
  return std::nullopt;
}

}  // namespace dstc::ops
