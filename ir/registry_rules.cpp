#include "ir/registry_rules.h"
#include <algorithm>

namespace dstc::ir::rules {

bool require_same_shape(const OpContext& ctx, size_t i, std::string& error, bool same_dtype) {
  const TensorType& a = ctx.operands[0];
  const TensorType& b = ctx.operands[i];
  bool same = same_dtype ? a == b : TensorType(a.dtype, b.shape()) == a;
  if (!same) return fail(error, "operand {} has type {}, expected {}", i + 1, str(b), str(a));
  return true;
}

bool require_float(const TensorType& t, std::string_view what, std::string& error) {
  if (!is_float(t.dtype)) return fail(error, "{} must have a floating-point type, not {}", what, str(t));
  return true;
}

bool require_integer(const TensorType& t, std::string_view what, std::string& error) {
  if (t.dtype != DType::I32 && t.dtype != DType::I64)
    return fail(error, "{} must have type i32 or i64, not {}", what, str(t));
  return true;
}

bool require_rank(const TensorType& t, int rank, std::string_view what, std::string& error) {
  if (t.rank != rank) return fail(error, "{} must have rank {}, not {}", what, rank, str(t));
  return true;
}

bool normalize_dim(int64_t& dim, int rank, std::string& error) {
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank) return fail(error, "dimension {} is out of range for rank {}", dim, rank);
  dim = d;
  return true;
}

bool require_reduction(std::string_view op, std::string& error) {
  if (op != "sum" && op != "max") return fail(error, "reduction must be \"sum\" or \"max\", not \"{}\"", op);
  return true;
}

bool require_shape(std::span<const int64_t> shape, std::string& error) {
  if (shape.size() > kMaxRank) return fail(error, "shape has more than {} dimensions", kMaxRank);
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    return fail(error, "shape sizes must be >= 0");
  return true;
}

bool reduced_shape(const TensorType& x, std::span<const int64_t> dims, bool keepdim, std::vector<int64_t>& shape,
                   std::string& error) {
  std::vector<bool> reduced(static_cast<size_t>(x.rank), false);
  for (int64_t d : dims) {
    if (!normalize_dim(d, x.rank, error)) return false;
    reduced[static_cast<size_t>(d)] = true;
  }
  shape.clear();
  for (int i = 0; i < x.rank; ++i) {
    if (!reduced[static_cast<size_t>(i)])
      shape.push_back(x.dim(i));
    else if (keepdim)
      shape.push_back(1);
  }
  return true;
}

double traffic(const OpContext& ctx, std::span<const TensorType> results) {
  double bytes = 0;
  for (const TensorType& t : ctx.operands) bytes += static_cast<double>(t.bytes());
  for (const TensorType& t : results) bytes += static_cast<double>(t.bytes());
  return bytes;
}

OpCost elementwise_cost(const OpContext& ctx, std::span<const TensorType> results, double flops_per_element) {
  double n = results.empty() ? 0 : static_cast<double>(results[0].numel());
  return {flops_per_element * n, traffic(ctx, results)};
}

void sum_dims_attr(const OpContext& ctx, size_t, ReducedDims& reduced) {
  const int rank = ctx.operands[0].rank;
  for (int64_t d : ctx.attrs.ints("dims")) reduced.sum(0, static_cast<int>(d < 0 ? d + rank : d));
}

void sum_rows_of_second(const OpContext& ctx, size_t, ReducedDims& reduced) {
  reduced.sum_all(1, ctx.operands[1].rank - 1);
}

void batch_norm_sums(const OpContext& ctx, size_t, ReducedDims& reduced) {
  const size_t x = ctx.attrs.kind() == OpKind::BatchNormStats ? 0 : 1;
  const bool local = ctx.attrs.integer("groups") > 1;
  for (int d = 0; d < ctx.operands[x].rank; ++d)
    if (d != 1 && !(local && d == 0)) reduced.sum(x, d);
}

}  // namespace dstc::ir::rules
