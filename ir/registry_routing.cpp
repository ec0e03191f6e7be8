// Routing ops of mixtures of experts: a router's top-k, the dispatch of
// tokens to experts' capacity slots and their combination back, and the
// gradients. A token goes to each expert whose gate is nonzero; along the
// routed dim (gates' second-last) tokens take an expert's slots in order,
// those past its capacity are dropped. The dims before it are groups, each
// with its own slots.
#include <algorithm>
#include <cmath>

#include "ir/registry_rules.h"

namespace dstc::ir::rules {
namespace {

using Types = std::vector<TensorType>;
using Results = std::span<const TensorType>;

bool top_k_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "the input", error)) return false;
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, x.rank, error)) return false;
  int64_t k = ctx.attrs.integer("k");
  if (k < 1 || k > x.dim(static_cast<int>(dim)))
    return fail(error, "k = {} must be between 1 and the size {} of dim {}", k, x.dim(static_cast<int>(dim)), dim);
  const int64_t groups = ctx.attrs.integer("groups"), kept = ctx.attrs.integer("group_k");
  if (groups != 0 || kept != 0) {
    const int64_t n = x.dim(static_cast<int>(dim));
    if (groups < 1 || n % groups != 0 || kept < 1 || kept > groups || k > kept * (n / groups))
      return fail(error, "groups = {} must divide dim {}'s {} entries, and group_k = {} groups must hold k = {}",
                  groups, dim, n, kept, k);
  }
  if (ctx.operands.size() == 2 && !require_same_shape(ctx, 1, error)) return false;
  out.push_back(x);
  return true;
}

// count_nonzero(x, dims) -> x without dims, in f32: the entries of x that
// are not zero, over dims (the tokens a top_k routes to each expert, per
// micro-batch or per sequence), so splitting those makes the counts
// partial sums.
bool count_nonzero_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  std::vector<int64_t> kept;
  if (!require_float(x, "the input", error) || !reduced_shape(x, ctx.attrs.ints("dims"), false, kept, error))
    return false;
  out.emplace_back(DType::F32, kept);
  return true;
}

// x[..., s, h] and gates[..., s, e] agree but in their last dims.
bool tokens_and_gates(const TensorType& x, const TensorType& gates, std::string& error) {
  if (!require_float(x, "the tokens", error) || !require_float(gates, "the gates", error)) return false;
  if (x.rank < 2 || gates.rank != x.rank ||
      !std::equal(x.dims.begin(), x.dims.begin() + x.rank - 1, gates.dims.begin()))
    return fail(error, "tokens {} and gates {} must be [..., s, h] and [..., s, e]", str(x), str(gates));
  return true;
}

// dispatch(x[..., s, h], gates[..., s, e]) -> [..., e, capacity, h]
bool dispatch_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  const TensorType& gates = ctx.operands[1];
  if (!tokens_and_gates(x, gates, error)) return false;
  if (x.rank + 1 > kMaxRank) return fail(error, "the slots of {} would have more than {} dims", str(x), kMaxRank);
  int64_t capacity = ctx.attrs.integer("capacity");
  if (capacity < 1) return fail(error, "capacity must be positive, got {}", capacity);
  std::vector<int64_t> shape(x.dims.begin(), x.dims.begin() + x.rank - 2);
  shape.insert(shape.end(), {gates.dim(gates.rank - 1), capacity, x.dim(x.rank - 1)});
  out.emplace_back(x.dtype, shape);
  return true;
}

// The experts' slots y[..., e, c, h] and gates[..., s, e] agree on their groups and e.
bool slots_and_gates(const TensorType& y, const TensorType& gates, std::string& error) {
  if (!require_float(y, "the slots", error) || !require_float(gates, "the gates", error)) return false;
  if (gates.rank < 2 || y.rank != gates.rank + 1 ||
      !std::equal(gates.dims.begin(), gates.dims.begin() + gates.rank - 2, y.dims.begin()) ||
      y.dim(y.rank - 3) != gates.dim(gates.rank - 1))
    return fail(error, "slots {} and gates {} must be [..., e, c, h] and [..., s, e]", str(y), str(gates));
  return true;
}

// combine(y[..., e, c, h], gates[..., s, e]) -> [..., s, h]
bool combine_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& y = ctx.operands[0];
  const TensorType& gates = ctx.operands[1];
  if (!slots_and_gates(y, gates, error)) return false;
  std::vector<int64_t> shape(gates.dims.begin(), gates.dims.begin() + gates.rank - 1);
  shape.push_back(y.dim(y.rank - 1));
  out.emplace_back(y.dtype, shape);
  return true;
}

// combine_gate_grad(dz[..., s, h], y[..., e, c, h], gates[..., s, e]) -> [..., s, e]
bool combine_gate_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& dz = ctx.operands[0];
  const TensorType& y = ctx.operands[1];
  const TensorType& gates = ctx.operands[2];
  if (!slots_and_gates(y, gates, error) || !tokens_and_gates(dz, gates, error)) return false;
  if (dz.dim(dz.rank - 1) != y.dim(y.rank - 1))
    return fail(error, "the gradient {} and the slots {} differ in their last dim", str(dz), str(y));
  out.push_back(gates);
  return true;
}

// Each slot is a token row moved once, scaled when weighted.
OpCost slot_cost(const OpContext& ctx, Results results, const TensorType& slots) {
  double per_slot = ctx.attrs.boolean("weighted") ? 1 : 0;
  return {per_slot * static_cast<double>(slots.numel()), traffic(ctx, results)};
}

}  // namespace

void add_routing_ops(std::vector<OpInfo>& t) {
  // Partial selection keeps a running k-best per row: about log2(k) + 1
  // comparisons per element.
  auto top_k_cost = [](const OpContext& c, Results r) {
    double k = static_cast<double>(c.attrs.integer("k"));
    return elementwise_cost(c, r, std::log2(k) + 1);
  };
  // `groups` > 0: only among the `group_k` best of that many groups of
  // consecutive entries (node-limited routing).
  t.push_back(make_op(
      OpKind::TopK, 1, 1, 1,
      {required("dim", AttrType::Int), required("k", AttrType::Int), int_attr("groups", 0), int_attr("group_k", 0)},
      top_k_shape, top_k_cost));
  // (dy, x): dy where x is among its top k.
  t.push_back(make_op(
      OpKind::TopKGrad, 2, 2, 1,
      {required("dim", AttrType::Int), required("k", AttrType::Int), int_attr("groups", 0), int_attr("group_k", 0)},
      top_k_shape, [](const OpContext& c, Results r) { return elementwise_cost(c, r, 1); }));
  t.back().linearity = Linearity::First;
  // Unweighted it is combine's gradient for the tokens, weighted dispatch's
  // for the slots (and the other way round).
  t.push_back(make_op(OpKind::Dispatch, 2, 2, 1, {required("capacity", AttrType::Int), bool_attr("weighted", false)},
                      dispatch_shape, [](const OpContext& c, Results r) { return slot_cost(c, r, r[0]); }));
  t.back().linearity = Linearity::First;
  t.push_back(make_op(OpKind::Combine, 2, 2, 1, {bool_attr("weighted", true)}, combine_shape,
                      [](const OpContext& c, Results r) { return slot_cost(c, r, c.operands[0]); }));
  t.back().linearity = Linearity::First;
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) {
    // A token sums its experts' slots; the gates' gradient sums over h.
    r.sum(0, c.operands[0].rank - 3);
    r.sum(1, c.operands[1].rank - 1);
  };
  // The gates' gradient: dz · y of each kept slot.
  t.push_back(make_op(OpKind::CombineGateGrad, 3, 3, 1, {}, combine_gate_grad_shape, [](const OpContext& c, Results r) {
    return OpCost{2.0 * static_cast<double>(c.operands[1].numel()), traffic(c, r)};
  }));
  t.back().linearity = Linearity::Product;
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) {
    r.sum(0, c.operands[0].rank - 1);
    r.sum(1, c.operands[1].rank - 1);
  };
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::CountNonzero, 1, 1, 1, {required("dims", AttrType::IntList)},
                                count_nonzero_shape, [](const OpContext& c, Results r) {
                                  return OpCost{static_cast<double>(c.operands[0].numel()), traffic(c, r)};
                                })));
  t.back().reduced = sum_dims_attr;
}

}  // namespace dstc::ir::rules
