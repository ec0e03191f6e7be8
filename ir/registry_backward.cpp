// Backward compute ops (what autodiff emits), optimizer steps and gradient
// accumulation: signatures, shape rules, costs.
#include <algorithm>

#include "ir/pointwise_ops.h"
#include "ir/registry_rules.h"

namespace dstc::ir::rules {

namespace {

using Types = std::vector<TensorType>;
using Results = std::span<const TensorType>;

// dx from (dy, x): dy and x have one shape.
bool unary_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!require_float(ctx.operands[0], "the gradient", error) || !require_same_shape(ctx, 1, error)) return false;
  out.push_back(ctx.operands[1]);
  return true;
}

bool softmax_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, ctx.operands[0].rank, error)) return false;
  return unary_grad_shape(ctx, out, error);
}

// (dy, x, gamma) -> dx: x normalized over its last dimension.
bool layernorm_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[1];
  if (!require_float(x, "the input", error) || !require_same_shape(ctx, 1, error)) return false;
  if (x.rank < 1) return fail(error, "layernorm needs rank >= 1, got {}", str(x));
  TensorType param(x.dtype, {x.dim(x.rank - 1)});
  if (!(ctx.operands[2] == param))
    return fail(error, "operand 3 has type {}, expected {}", str(ctx.operands[2]), str(param));
  out.push_back(x);
  return true;
}

// (dy, x) -> dgamma, dbeta.
bool layernorm_weight_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[1];
  if (!require_float(x, "the input", error) || !require_same_shape(ctx, 1, error)) return false;
  if (x.rank < 1) return fail(error, "layernorm needs rank >= 1, got {}", str(x));
  TensorType param(x.dtype, {x.dim(x.rank - 1)});
  out.push_back(param);
  out.push_back(param);
  return true;
}

bool dropout_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  double p = ctx.attrs.real("p");
  if (!(p >= 0 && p < 1)) return fail(error, "dropout probability p = {} is not in [0, 1)", p);
  if (!require_float(ctx.operands[0], "the gradient", error)) return false;
  if (!(ctx.operands[1] == TensorType(DType::U8, ctx.operands[0].shape())))
    return fail(error, "the mask has type {}, expected {}", str(ctx.operands[1]),
                str(TensorType(DType::U8, ctx.operands[0].shape())));
  out.push_back(ctx.operands[0]);
  return true;
}

// (dy [..., H], ids [...]) -> dtable [vocab, H].
bool embedding_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& dy = ctx.operands[0];
  const TensorType& ids = ctx.operands[1];
  if (!require_float(dy, "the gradient", error) || !require_integer(ids, "the indices", error)) return false;
  if (dy.rank != ids.rank + 1 || !std::equal(ids.dims.begin(), ids.dims.begin() + ids.rank, dy.dims.begin()))
    return fail(error, "gradient {} must have the shape of the indices {} plus one dimension", str(dy), str(ids));
  int64_t vocab = ctx.attrs.integer("vocab");
  if (vocab < 1) return fail(error, "vocab must be positive, not {}", vocab);
  out.push_back(TensorType(dy.dtype, {vocab, dy.dim(dy.rank - 1)}));
  return true;
}

// (dloss [], logits, labels) -> dlogits.
bool cross_entropy_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& dloss = ctx.operands[0];
  const TensorType& logits = ctx.operands[1];
  const TensorType& labels = ctx.operands[2];
  if (!require_rank(dloss, 0, "the loss gradient", error) || !require_float(logits, "the logits", error) ||
      !require_integer(labels, "the labels", error))
    return false;
  if (logits.rank < 1 || labels.rank != logits.rank - 1 ||
      !std::equal(labels.dims.begin(), labels.dims.begin() + labels.rank, logits.dims.begin()))
    return fail(error, "labels {} must have the shape of logits {} without its last dimension", str(labels),
                str(logits));
  std::string_view reduction = ctx.attrs.string("reduction");
  if (reduction != "mean" && reduction != "sum")
    return fail(error, "reduction must be \"mean\" or \"sum\", not \"{}\"", reduction);
  out.push_back(logits);
  return true;
}

// (dloss, x, m, s, labels) -> dx on the class shard x: dloss times
// (exp(x - m) / s - 1 at the label), s the all-shard sum of exp(x - m).
bool cross_entropy_parts_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& dloss = ctx.operands[0];
  const TensorType& x = ctx.operands[1];
  if (!require_rank(dloss, 0, "the loss gradient", error) || !require_float(x, "the logits", error) ||
      !require_integer(ctx.operands[4], "the labels", error))
    return false;
  for (size_t i = 2; i < 5; ++i) {
    const TensorType& rows = ctx.operands[i];
    if (x.rank < 1 || rows.rank != x.rank - 1 ||
        !std::equal(rows.dims.begin(), rows.dims.begin() + rows.rank, x.dims.begin()))
      return fail(error, "operand {} ({}) must have the shape of logits {} without its last dimension", i + 1,
                  str(rows), str(x));
  }
  out.push_back(x);
  return true;
}

// (dout, q, k, v) -> dq, dk, dv.
bool attention_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& dout = ctx.operands[0];
  const TensorType& q = ctx.operands[1];
  const TensorType& k = ctx.operands[2];
  const TensorType& v = ctx.operands[3];
  for (const TensorType* t : {&q, &k, &v, &dout}) {
    if (!require_rank(*t, 4, "attention operands", error)) return false;
  }
  TensorType expected = q;
  expected.dims[3] = v.dim(3);
  if (!(dout == expected) || k.dim(3) != q.dim(3) || v.dim(2) != k.dim(2) || k.dim(0) != q.dim(0) ||
      v.dim(0) != q.dim(0) || v.dim(1) != k.dim(1) || k.dim(1) < 1 || q.dim(1) % k.dim(1) != 0 || k.dtype != q.dtype ||
      v.dtype != q.dtype)
    return fail(error, "dout {}, q {}, k {} and v {} do not form an attention", str(dout), str(q), str(k), str(v));
  out.push_back(q);
  out.push_back(k);
  out.push_back(v);
  return true;
}

// Recomputes the scores, then dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q.
OpCost attention_grad_cost(const OpContext& ctx, Results results) {
  const TensorType& q = ctx.operands[1];
  const TensorType& v = ctx.operands[3];
  double bhst = static_cast<double>(q.dim(0) * q.dim(1) * q.dim(2) * v.dim(2));
  double flops = 2 * bhst * static_cast<double>(3 * q.dim(3) + 2 * v.dim(3));
  if (ctx.attrs.boolean("causal")) flops /= 2;
  return {flops, traffic(ctx, results)};
}

// (dy, x, w) -> dx (x is read for its shape only) or dw (w for its shape only).
bool conv_grad_check(const OpContext& ctx, std::string& error) {
  TensorType y;
  if (!conv_geometry(ctx, ctx.operands[1], ctx.operands[2], y, error)) return false;
  if (!(ctx.operands[0] == y))
    return fail(error, "gradient {} does not match the convolution's output {}", str(ctx.operands[0]), str(y));
  return true;
}

bool conv_input_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!conv_grad_check(ctx, error)) return false;
  out.push_back(ctx.operands[1]);
  return true;
}

bool conv_weight_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!conv_grad_check(ctx, error)) return false;
  out.push_back(ctx.operands[2]);
  return true;
}

// (dy, x) -> dx.
bool pool_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType y;
  if (!pool_geometry(ctx, ctx.operands[1], y, error)) return false;
  if (!(ctx.operands[0] == y))
    return fail(error, "gradient {} does not match the pooling's output {}", str(ctx.operands[0]), str(y));
  out.push_back(ctx.operands[1]);
  return true;
}

// (dy, x, gamma) -> dx, dgamma, dbeta.
bool batchnorm_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[1];
  if (!require_float(x, "the input", error) || !require_same_shape(ctx, 1, error)) return false;
  if (x.rank < 2) return fail(error, "batchnorm needs rank >= 2, got {}", str(x));
  TensorType param(x.dtype, {x.dim(1)});
  if (!(ctx.operands[2] == param))
    return fail(error, "operand 3 has type {}, expected {}", str(ctx.operands[2]), str(param));
  out.push_back(x);
  out.push_back(param);
  out.push_back(param);
  return true;
}

// (dy, a, b) -> da, db, both of a's shape (the caller sums db over the
// leading dims b is broadcast over).
bool maximum_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& a = ctx.operands[1];
  const TensorType& b = ctx.operands[2];
  if (!require_float(ctx.operands[0], "the gradient", error) || !require_same_shape(ctx, 1, error)) return false;
  if (b.dtype != a.dtype || b.rank > a.rank ||
      !std::equal(b.dims.begin(), b.dims.begin() + b.rank, a.dims.begin() + (a.rank - b.rank)))
    return fail(error, "operand 3 ({}) must equal the trailing dimensions of operand 2 ({})", str(b), str(a));
  out.push_back(a);
  out.push_back(a);
  return true;
}

// (dy, x[, gamma]) -> dx.
bool rms_norm_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[1];
  if (!require_float(x, "the input", error) || !require_same_shape(ctx, 1, error)) return false;
  if (x.rank < 1) return fail(error, "rms_norm needs rank >= 1, got {}", str(x));
  TensorType param(x.dtype, {x.dim(x.rank - 1)});
  if (ctx.operands.size() > 2 && !(ctx.operands[2] == param))
    return fail(error, "operand 3 has type {}, expected {}", str(ctx.operands[2]), str(param));
  out.push_back(x);
  return true;
}

// (dy, x) -> dgamma[H].
bool rms_norm_weight_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[1];
  if (!require_float(x, "the input", error) || !require_same_shape(ctx, 1, error)) return false;
  if (x.rank < 1) return fail(error, "rms_norm needs rank >= 1, got {}", str(x));
  out.push_back(TensorType(x.dtype, {x.dim(x.rank - 1)}));
  return true;
}

// (dy, x, y) -> dx: y is x reduced by max over `dims`, dy has y's shape.
bool reduce_max_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[1];
  std::vector<int64_t> kept;
  if (!reduced_shape(x, ctx.attrs.ints("dims"), false, kept, error)) return false;
  TensorType y(x.dtype, kept);
  if (!(ctx.operands[2] == y) || !(ctx.operands[0] == y))
    return fail(error, "the gradient {} and the maximum {} must be {} reduced: {}", str(ctx.operands[0]),
                str(ctx.operands[2]), str(x), str(y));
  out.push_back(x);
  return true;
}

// Checks (dy, x, sum, sumsq, ...) of the batchnorm gradients.
bool batchnorm_grad_operands(const OpContext& ctx, std::string& error) {
  const TensorType& x = ctx.operands[1];
  if (!require_float(x, "the input", error) || !require_same_shape(ctx, 1, error)) return false;
  if (x.rank < 2) return fail(error, "batchnorm needs rank >= 2, got {}", str(x));
  if (ctx.attrs.integer("count") < 1) return fail(error, "count must be positive");
  TensorType stats(DType::F32, {x.dim(1)});
  for (size_t i = 2; i < 4; ++i) {
    if (!(ctx.operands[i] == stats))
      return fail(error, "operand {} has type {}, expected {}", i + 1, str(ctx.operands[i]), str(stats));
  }
  return true;
}

// (dy, x, sum, sumsq) -> dgamma = Σ dy·x̂, dbeta = Σ dy per channel (f32).
bool batchnorm_weight_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!batchnorm_grad_operands(ctx, error)) return false;
  TensorType stats(DType::F32, {ctx.operands[1].dim(1)});
  out.push_back(stats);
  out.push_back(stats);
  return true;
}

// (dy, x, sum, sumsq, gamma, dgamma, dbeta) -> dx.
bool batchnorm_input_grad_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!batchnorm_grad_operands(ctx, error)) return false;
  const TensorType& x = ctx.operands[1];
  TensorType param(x.dtype, {x.dim(1)});
  TensorType stats(DType::F32, {x.dim(1)});
  if (!(ctx.operands[4] == param))
    return fail(error, "operand 5 has type {}, expected {}", str(ctx.operands[4]), str(param));
  for (size_t i = 5; i < 7; ++i) {
    if (!(ctx.operands[i] == stats))
      return fail(error, "operand {} has type {}, expected {}", i + 1, str(ctx.operands[i]), str(stats));
  }
  out.push_back(x);
  return true;
}

// Weight-like operands (w, and for adam m and v) share a float type; the
// gradient has their shape and any float dtype (fp32 master weights with a
// bf16 gradient under mixed precision).
bool optimizer_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& w = ctx.operands[0];
  if (!require_float(w, "the weight", error) || !require_float(ctx.operands[1], "the gradient", error)) return false;
  if (!require_same_shape(ctx, 1, error, false)) return false;
  for (size_t i = 2; i < ctx.operands.size(); ++i) {
    if (!require_same_shape(ctx, i, error)) return false;
  }
  if (ctx.attrs.real("lr") < 0) return fail(error, "learning rate must be >= 0");
  for (size_t i = 0; i < std::max<size_t>(1, ctx.operands.size() - 1); ++i) out.push_back(w);
  return true;
}

bool accumulate_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!require_float(ctx.operands[0], "the accumulator", error) ||
      !require_float(ctx.operands[1], "the addend", error) || !require_same_shape(ctx, 1, error, false))
    return false;
  out.push_back(ctx.operands[0]);
  return true;
}

OpCost per_input(const OpContext& ctx, Results results, double per_element) {
  return {per_element * static_cast<double>(ctx.operands[0].numel()), traffic(ctx, results)};
}

}  // namespace

void add_backward_ops(std::vector<OpInfo>& t) {
  for (const PointwiseOp& p : pointwise_ops()) {
    t.push_back(make_op(p.grad, 2, 2, 1, {}, unary_grad_shape, [](const OpContext& c, Results r) {
      return per_input(c, r, find_pointwise(c.attrs.kind())->grad_flops);
    }));
    t.back().linearity = Linearity::First;  // an activation's gradient is linear in dy
  }
  t.push_back(
      priced_as(CostClass::Reduction, make_op(OpKind::SoftmaxGrad, 2, 2, 1, {int_attr("dim", -1)}, softmax_grad_shape,
                                              [](const OpContext& c, Results r) { return per_input(c, r, 4); })));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::LayerNormGrad, 3, 3, 1, {float_attr("eps", 1e-5)}, layernorm_grad_shape,
                                [](const OpContext& c, Results r) { return per_input(c, r, 10); })));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Reduction, make_op(OpKind::LayerNormWeightGrad, 2, 2, 2, {float_attr("eps", 1e-5)},
                                                      layernorm_weight_grad_shape, [](const OpContext& c, Results r) {
                                                        return per_input(c, r, 6);
                                                      })));
  t.back().linearity = Linearity::First;
  t.back().reduced = sum_rows_of_second;
  t.push_back(make_op(OpKind::DropoutGrad, 2, 2, 1, {required("p", AttrType::Float)}, dropout_grad_shape,
                      [](const OpContext& c, Results r) { return per_input(c, r, 2); }));
  t.back().linearity = Linearity::First;
  t.push_back(make_op(OpKind::EmbeddingGrad, 2, 2, 1,
                      {required("vocab", AttrType::Int), int_attr("offset", 0), int_attr("offset_axis", -1)},
                      embedding_grad_shape, [](const OpContext& c, Results r) { return per_input(c, r, 1); }));
  t.back().linearity = Linearity::First;
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) { r.sum_all(1, c.operands[1].rank); };
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::CrossEntropyPartsGrad, 5, 5, 1, {}, cross_entropy_parts_grad_shape,
                                [](const OpContext& c, Results r) {
                                  return OpCost{4.0 * static_cast<double>(c.operands[1].numel()), traffic(c, r)};
                                })));
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::CrossEntropyGrad, 3, 3, 1, {string_attr("reduction", "mean")},
                                cross_entropy_grad_shape, [](const OpContext& c, Results r) {
                                  return OpCost{4.0 * static_cast<double>(c.operands[1].numel()), traffic(c, r)};
                                })));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Matmul,
                        make_op(OpKind::AttentionGrad, 4, 4, 3, {bool_attr("causal", false), float_attr("scale", 0)},
                                attention_grad_shape, attention_grad_cost)));
  t.back().linearity = Linearity::First;
  t.back().reduced = [](const OpContext&, size_t result, ReducedDims& r) {
    // dk and dv sum over q's rows: a split query sequence (context
    // parallelism) leaves them partial.
    if (result > 0) r.sum(1, 2);
  };
  const std::vector<AttrSpec> conv_attrs = {list_attr("stride"), list_attr("padding"), int_attr("groups", 1)};
  t.push_back(priced_as(CostClass::Matmul,
                        make_op(
                            OpKind::Conv2dInputGrad, 3, 3, 1, conv_attrs, conv_input_grad_shape,
                            [](const OpContext& c, Results r) { return conv_cost(c, c.operands[0], c.operands[2], r); },
                            OpCategory::Compute, 1u << 1)));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Matmul,
                        make_op(
                            OpKind::Conv2dWeightGrad, 3, 3, 1, conv_attrs, conv_weight_grad_shape,
                            [](const OpContext& c, Results r) { return conv_cost(c, c.operands[0], c.operands[2], r); },
                            OpCategory::Compute, 1u << 2)));
  t.back().linearity = Linearity::Product;
  t.back().reduced = [](const OpContext&, size_t, ReducedDims& r) { r.sum(0, 0); };
  const std::vector<AttrSpec> pool_attrs = {required("kernel", AttrType::IntList), list_attr("stride"),
                                            list_attr("padding")};
  t.push_back(make_op(OpKind::MaxPool2dGrad, 2, 2, 1, pool_attrs, pool_grad_shape,
                      [](const OpContext& c, Results r) { return per_input(c, r, 1); }));
  t.back().linearity = Linearity::First;
  t.push_back(make_op(
      OpKind::AvgPool2dGrad, 2, 2, 1, pool_attrs, pool_grad_shape,
      [](const OpContext& c, Results r) { return per_input(c, r, 1); }, OpCategory::Compute, 1u << 1));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::BatchNormGrad, 3, 3, 3, {float_attr("eps", 1e-5)}, batchnorm_grad_shape,
                                [](const OpContext& c, Results r) { return per_input(c, r, 12); })));
  t.back().linearity = Linearity::First;
  t.back().reduced = [](const OpContext& c, size_t result, ReducedDims& r) {
    if (result == 0) return;
    for (int d = 0; d < c.operands[1].rank; ++d)
      if (d != 1) r.sum(1, d);
  };
  t.push_back(make_op(OpKind::MaximumGrad, 3, 3, 2, {}, maximum_grad_shape,
                      [](const OpContext& c, Results r) { return per_input(c, r, 2); }));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::LogSoftmaxGrad, 2, 2, 1, {int_attr("dim", -1)}, softmax_grad_shape,
                                [](const OpContext& c, Results r) { return per_input(c, r, 4); })));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::RmsNormGrad, 2, 3, 1, {float_attr("eps", 1e-5)}, rms_norm_grad_shape,
                                [](const OpContext& c, Results r) { return per_input(c, r, 8); })));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Reduction, make_op(OpKind::RmsNormWeightGrad, 2, 2, 1, {float_attr("eps", 1e-5)},
                                                      rms_norm_weight_grad_shape, [](const OpContext& c, Results r) {
                                                        return per_input(c, r, 4);
                                                      })));
  t.back().linearity = Linearity::First;
  t.back().reduced = sum_rows_of_second;
  t.push_back(make_op(OpKind::ReduceMaxGrad, 3, 3, 1, {required("dims", AttrType::IntList)}, reduce_max_grad_shape,
                      [](const OpContext& c, Results r) {
                        return OpCost{static_cast<double>(r[0].numel()), traffic(c, r)};
                      }));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(
      CostClass::Reduction,
      make_op(OpKind::BatchNormWeightGrad, 4, 4, 2,
              {required("count", AttrType::Int), float_attr("eps", 1e-5), int_attr("groups", 1)},
              batchnorm_weight_grad_shape, [](const OpContext& c, Results r) { return per_input(c, r, 6); })));
  t.back().linearity = Linearity::First;
  t.back().reduced = batch_norm_sums;
  t.push_back(make_op(OpKind::BatchNormInputGrad, 7, 7, 1, {required("count", AttrType::Int), float_attr("eps", 1e-5)},
                      batchnorm_input_grad_shape, [](const OpContext& c, Results r) { return per_input(c, r, 8); }));
  t.back().linearity = Linearity::Gradients;
}

void add_optimizer_ops(std::vector<OpInfo>& t) {
  t.push_back(make_op(
      OpKind::Sgd, 2, 2, 1, {required("lr", AttrType::Float), float_attr("weight_decay", 0)}, optimizer_shape,
      [](const OpContext& c, Results r) { return per_input(c, r, 3); }, OpCategory::Optimizer));
  t.push_back(make_op(
      OpKind::Adam, 4, 4, 3,
      {required("lr", AttrType::Float), float_attr("beta1", 0.9), float_attr("beta2", 0.999), float_attr("eps", 1e-8),
       float_attr("weight_decay", 0), int_attr("step", 1)},
      optimizer_shape, [](const OpContext& c, Results r) { return per_input(c, r, 14); }, OpCategory::Optimizer));
  t.push_back(make_op(OpKind::Accumulate, 2, 2, 1, {}, accumulate_shape,
                      [](const OpContext& c, Results r) { return per_input(c, r, 1); }));
  t.back().linearity = Linearity::Sum;
}

}  // namespace dstc::ir::rules
