// Internal to the registry: helpers shared by the shape and cost rules, and
// the functions that register each family of ops.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/registry.h"

namespace dstc::ir::rules {

void add_forward_ops(std::vector<OpInfo>& table);
void add_backward_ops(std::vector<OpInfo>& table);
void add_optimizer_ops(std::vector<OpInfo>& table);
void add_communication_ops(std::vector<OpInfo>& table);
void add_routing_ops(std::vector<OpInfo>& table);

template <typename... Args>
bool fail(std::string& error, fmt::format_string<Args...> format, Args&&... args) {
  error = fmt::format(format, std::forward<Args>(args)...);
  return false;
}

inline std::string str(const TensorType& t) { return to_string(t); }

// Operand i's type equals operand 0's shape (dtype may differ when !same_dtype).
bool require_same_shape(const OpContext& ctx, size_t i, std::string& error, bool same_dtype = true);
bool require_float(const TensorType& t, std::string_view what, std::string& error);
bool require_integer(const TensorType& t, std::string_view what, std::string& error);
bool require_rank(const TensorType& t, int rank, std::string_view what, std::string& error);
// Normalizes a possibly negative dimension index; false when out of range.
bool normalize_dim(int64_t& dim, int rank, std::string& error);
bool require_reduction(std::string_view op, std::string& error);
// A shape given as an attribute: at most kMaxRank sizes, none negative.
bool require_shape(std::span<const int64_t> shape, std::string& error);
// x's shape reduced over `dims` (each kept as size 1 with keepdim); false
// when a dim is out of range.
bool reduced_shape(const TensorType& x, std::span<const int64_t> dims, bool keepdim, std::vector<int64_t>& shape,
                   std::string& error);

// Bytes of all operands plus all results: the memory traffic of a kernel
// that reads its inputs once and writes its outputs once.
double traffic(const OpContext& ctx, std::span<const TensorType> results);
OpCost elementwise_cost(const OpContext& ctx, std::span<const TensorType> results, double flops_per_element);

// Reduced-dims rules several ops share: operand 0's `dims` attribute
// summed (sum, count_nonzero); every dim of operand 1 but the last summed
// (the norms' weight gradients); every dim of operand 0 (statistics) or 1
// (weight gradients) but the channels, and the batch's too when `groups`
// keeps local statistics' shards apart (batch norm).
void sum_dims_attr(const OpContext& ctx, size_t result, ReducedDims& reduced);
void sum_rows_of_second(const OpContext& ctx, size_t result, ReducedDims& reduced);
void batch_norm_sums(const OpContext& ctx, size_t result, ReducedDims& reduced);

// Output of a 2-D convolution of x [N, C, H, W] with w [O, C/groups, KH, KW]
// under the op's stride, padding and groups attributes.
bool conv_geometry(const OpContext& ctx, const TensorType& x, const TensorType& w, TensorType& y, std::string& error);
// 2 * |y| * C/groups * KH * KW: the convolution and each of its two gradients.
OpCost conv_cost(const OpContext& ctx, const TensorType& y, const TensorType& w, std::span<const TensorType> results);
// Output of pooling x [N, C, H, W] under kernel, stride (default kernel), padding.
bool pool_geometry(const OpContext& ctx, const TensorType& x, TensorType& y, std::string& error);

}  // namespace dstc::ir::rules

namespace dstc::ir::rules {

inline AttrSpec required(std::string_view name, AttrType type) { return {name, type, true, 0, 0, {}}; }
inline AttrSpec int_attr(std::string_view name, int64_t def) { return {name, AttrType::Int, false, def, 0, {}}; }
inline AttrSpec bool_attr(std::string_view name, bool def) { return {name, AttrType::Bool, false, def ? 1 : 0, 0, {}}; }
inline AttrSpec float_attr(std::string_view name, double def) { return {name, AttrType::Float, false, 0, def, {}}; }
inline AttrSpec string_attr(std::string_view name, std::string_view def) {
  return {name, AttrType::String, false, 0, 0, def};
}
inline AttrSpec list_attr(std::string_view name) { return {name, AttrType::IntList, false, 0, 0, {}}; }

inline OpInfo make_op(OpKind kind, uint8_t min_operands, uint8_t max_operands, uint8_t results,
                      std::vector<AttrSpec> attrs, ShapeRule infer, CostRule cost,
                      OpCategory category = OpCategory::Compute, uint32_t shape_only = 0) {
  OpInfo info;
  info.kind = kind;
  info.name = op_name(kind);
  info.category = category;
  if (category == OpCategory::Optimizer) info.cost_class = CostClass::Optimizer;
  info.min_operands = min_operands;
  info.max_operands = max_operands;
  info.results = results;
  info.attrs = std::move(attrs);
  info.shape_only_operands = shape_only;
  info.infer = infer;
  info.cost = cost;
  return info;
}

// An op whose kernel is priced as `cost_class` (the default: elementwise).
inline OpInfo priced_as(CostClass cost_class, OpInfo info) {
  info.cost_class = cost_class;
  return info;
}

}  // namespace dstc::ir::rules
