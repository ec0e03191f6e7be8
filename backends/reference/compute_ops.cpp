#include "backends/reference/compute_ops.h"

#include <fmt/format.h>

#include "backends/reference/kernels.h"
#include "backends/reference/op_context.h"
#include "ir/pointwise_ops.h"
#include "ir/registry.h"

namespace dstc::reference {

namespace {

using ir::OpKind;

kernels::BatchStats batch_stats(const ir::AttrReader& attrs, const HostTensor& sum, const HostTensor& sumsq) {
  return {sum, sumsq, static_cast<double>(attrs.integer("count")), attrs.real("eps")};
}

}  // namespace

std::string run_compute(const DeviceContext& ctx, std::span<const HostTensor* const> in, std::span<HostTensor> out) {
  ir::AttrReader attrs(ctx.module, ctx.function, ctx.op);
  auto x = [&](size_t i) -> const HostTensor& { return *in[i]; };
  HostTensor& y = out[0];
  if (const ir::PointwiseOp* p = ir::find_pointwise(ctx.op.kind)) {
    if (ctx.op.kind == p->kind) {
      kernels::pointwise(*p, x(0), y);
    } else {
      kernels::pointwise_grad(*p, x(0), x(1), y);
    }
    return {};
  }
  switch (ctx.op.kind) {
    case OpKind::Matmul:
      kernels::matmul(x(0), x(1), attrs.boolean("transpose_a"), attrs.boolean("transpose_b"), y);
      return {};
    case OpKind::Einsum: kernels::einsum(attrs.string("spec"), in, y); return {};
    case OpKind::Add: kernels::binary(kernels::Binary::Add, x(0), x(1), y); return {};
    case OpKind::Sub: kernels::binary(kernels::Binary::Sub, x(0), x(1), y); return {};
    case OpKind::Mul: kernels::binary(kernels::Binary::Mul, x(0), x(1), y); return {};
    case OpKind::Div: kernels::binary(kernels::Binary::Div, x(0), x(1), y); return {};
    case OpKind::Maximum: kernels::binary(kernels::Binary::Max, x(0), x(1), y); return {};
    case OpKind::Exp: kernels::unary(kernels::Unary::Exp, x(0), y); return {};
    case OpKind::Sqrt: kernels::unary(kernels::Unary::Sqrt, x(0), y); return {};
    case OpKind::LogSoftmax: kernels::log_softmax(x(0), normalized(attrs.integer("dim"), x(0).rank()), y); return {};
    case OpKind::RmsNorm: kernels::rms_norm(x(0), in.size() > 1 ? in[1] : nullptr, attrs.real("eps"), y); return {};
    case OpKind::ReduceMax: kernels::reduce_max(x(0), attrs.ints("dims"), y); return {};
    case OpKind::Expand: kernels::expand(x(0), attrs.ints("dims"), y); return {};
    case OpKind::BatchNormStats: kernels::batchnorm_stats(x(0), out[0], out[1]); return {};
    case OpKind::BatchNormApply:
      kernels::batchnorm_apply(x(0), batch_stats(attrs, x(1), x(2)), x(3), x(4), y);
      return {};
    case OpKind::Scale: kernels::scale(x(0), attrs.real("factor"), y); return {};
    case OpKind::Rope: {
      // Positions are logical: a shard of the sequence starts at its offset.
      const int dim = normalized(attrs.integer("dim"), x(0).rank());
      DevicePlacement where = result_placement(ctx, y.shape);
      kernels::rope(x(0), dim, attrs.real("base"), attrs.boolean("inverse"),
                    attrs.integer("offset") + where.offset[static_cast<size_t>(dim)], y);
      return {};
    }
    case OpKind::Softmax: kernels::softmax(x(0), normalized(attrs.integer("dim"), x(0).rank()), y); return {};
    case OpKind::LayerNorm: kernels::layernorm(x(0), x(1), x(2), attrs.real("eps"), y); return {};
    case OpKind::Dropout: {
      DevicePlacement where = dropout_placement(ctx, y.shape);
      kernels::dropout(x(0), attrs.real("p"), static_cast<uint64_t>(attrs.integer("seed")),
                       {where.logical_shape, where.offset}, y, out[1]);
      return {};
    }
    case OpKind::Embedding: kernels::embedding(x(0), x(1), first_row(ctx, attrs, x(0).dim(0)), y); return {};
    case OpKind::CrossEntropy:
      if (!kernels::cross_entropy(x(0), x(1), attrs.string("reduction") == "mean", y))
        return "a label is outside the logits' classes";
      return {};
    case OpKind::CrossEntropyParts:
      kernels::cross_entropy_parts(x(0), x(1), x(2), first_class(operand_placement(ctx, 0, x(0).shape)), out[0],
                                   out[1]);
      return {};
    case OpKind::CrossEntropyTotal: kernels::cross_entropy_total(x(0), x(1), y); return {};
    case OpKind::Attention: {
      // A KV cache: its first `context` positions precede the step's k and
      // v. Without any (a prefill), it is only written, and may be a shard
      // (cache_shards).
      const int64_t context = attrs.integer("context");
      if (in.size() == 3 || context == 0) {
        kernels::attention(x(0), x(1), x(2), attrs.boolean("causal"), first_query(ctx, x(0).shape, x(1).dim(2)),
                           attrs.real("scale"), y);
        return {};
      }
      HostTensor keys = kernels::held_positions(x(3), 0, context, x(1));
      HostTensor values = kernels::held_positions(x(4), 0, context, x(2));
      kernels::attention(x(0), keys, values, attrs.boolean("causal"), first_query(ctx, x(0).shape, keys.dim(2)),
                         attrs.real("scale"), y);
      return {};
    }
    case OpKind::AttentionPart: {
      // This shard's run of positions starts at the cache's offset; q's
      // first row is at the context plus its own offset in the step.
      const int64_t context = attrs.integer("context");
      const int64_t first = operand_placement(ctx, 3, x(3).shape).offset[2];
      DevicePlacement queries = operand_placement(ctx, 0, x(0).shape);
      const int64_t first_query = context + x(1).dim(2) - queries.logical_shape[2] + queries.offset[2];
      HostTensor keys = kernels::held_positions(x(3), first, context, x(1));
      HostTensor values = kernels::held_positions(x(4), first, context, x(2));
      kernels::attention(x(0), keys, values, attrs.boolean("causal"), first_query - first, attrs.real("scale"), y,
                         &out[1]);
      return {};
    }
    case OpKind::AttentionMerge: kernels::attention_merge(x(0), x(1), y); return {};
    case OpKind::Conv2d: kernels::conv2d(x(0), x(1), conv_params(attrs), y); return {};
    case OpKind::MaxPool2d: kernels::max_pool2d(x(0), pool_params(attrs), y); return {};
    case OpKind::AvgPool2d: kernels::avg_pool2d(x(0), pool_params(attrs), y); return {};
    case OpKind::BatchNorm: kernels::batchnorm(x(0), x(1), x(2), attrs.real("eps"), y); return {};
    case OpKind::Slice:
      kernels::slice(x(0), normalized(attrs.integer("dim"), x(0).rank()), attrs.integer("start"), y);
      return {};
    case OpKind::Concat: kernels::concat(in, normalized(attrs.integer("dim"), x(0).rank()), y); return {};
    case OpKind::Reshape: kernels::copy_elements(x(0), y); return {};
    case OpKind::Transpose: kernels::transpose(x(0), attrs.ints("perm"), y); return {};
    case OpKind::Sum: kernels::sum(x(0), attrs.ints("dims"), y); return {};
    case OpKind::Fill: kernels::fill(attrs.real("value"), y); return {};
    case OpKind::Cast: kernels::cast(x(0), y); return {};
    case OpKind::Quantize: kernels::quantize(x(0), attrs.integer("block"), y); return {};
    case OpKind::Shard:
      if (attrs.boolean("flat"))
        kernels::flat_shard(x(0), axis_coord(ctx, attrs), y);
      else
        kernels::shard(x(0), normalized(attrs.integer("dim"), x(0).rank()), attrs.integer("parts"),
                       axis_coord(ctx, attrs), y);
      return {};
    case OpKind::Unshard:
      kernels::unshard(x(0), normalized(attrs.integer("dim"), x(0).rank()), axis_coord(ctx, attrs), y);
      return {};
    case OpKind::Partialize:
      if (axis_coord(ctx, attrs) == 0) y.data = x(0).data;
      return {};
    case OpKind::SoftmaxGrad:
      kernels::softmax_grad(x(0), x(1), normalized(attrs.integer("dim"), x(1).rank()), y);
      return {};
    case OpKind::LayerNormGrad: kernels::layernorm_grad(x(0), x(1), x(2), attrs.real("eps"), y); return {};
    case OpKind::LayerNormWeightGrad:
      kernels::layernorm_weight_grad(x(0), x(1), attrs.real("eps"), out[0], out[1]);
      return {};
    case OpKind::DropoutGrad: kernels::dropout_grad(x(0), x(1), attrs.real("p"), y); return {};
    case OpKind::EmbeddingGrad:
      kernels::embedding_grad(x(0), x(1), first_row(ctx, attrs, attrs.integer("vocab")), y);
      return {};
    case OpKind::CrossEntropyGrad:
      if (!kernels::cross_entropy_grad(x(0), x(1), x(2), attrs.string("reduction") == "mean", y))
        return "a label is outside the logits' classes";
      return {};
    case OpKind::CrossEntropyPartsGrad:
      kernels::cross_entropy_parts_grad(x(0), x(1), x(2), x(3), x(4), first_class(result_placement(ctx, y.shape)), y);
      return {};
    case OpKind::AttentionGrad:
      kernels::attention_grad(x(0), x(1), x(2), x(3), attrs.boolean("causal"),
                              first_query(ctx, x(1).shape, x(2).dim(2)), attrs.real("scale"), out[0], out[1], out[2]);
      return {};
    case OpKind::Conv2dInputGrad: kernels::conv2d_input_grad(x(0), x(2), conv_params(attrs), y); return {};
    case OpKind::Conv2dWeightGrad: kernels::conv2d_weight_grad(x(0), x(1), conv_params(attrs), y); return {};
    case OpKind::MaxPool2dGrad: kernels::max_pool2d_grad(x(0), x(1), pool_params(attrs), y); return {};
    case OpKind::AvgPool2dGrad: kernels::avg_pool2d_grad(x(0), pool_params(attrs), y); return {};
    case OpKind::BatchNormGrad:
      kernels::batchnorm_grad(x(0), x(1), x(2), attrs.real("eps"), out[0], out[1], out[2]);
      return {};
    case OpKind::MaximumGrad: kernels::maximum_grad(x(0), x(1), x(2), out[0], out[1]); return {};
    case OpKind::LogSoftmaxGrad:
      kernels::log_softmax_grad(x(0), x(1), normalized(attrs.integer("dim"), x(1).rank()), y);
      return {};
    case OpKind::RmsNormGrad:
      kernels::rms_norm_grad(x(0), x(1), in.size() > 2 ? in[2] : nullptr, attrs.real("eps"), y);
      return {};
    case OpKind::RmsNormWeightGrad: kernels::rms_norm_weight_grad(x(0), x(1), attrs.real("eps"), y); return {};
    case OpKind::ReduceMaxGrad: kernels::reduce_max_grad(x(0), x(1), x(2), attrs.ints("dims"), y); return {};
    case OpKind::BatchNormWeightGrad:
      kernels::batchnorm_weight_grad(x(0), x(1), batch_stats(attrs, x(2), x(3)), out[0], out[1]);
      return {};
    case OpKind::BatchNormInputGrad:
      kernels::batchnorm_input_grad(x(0), x(1), batch_stats(attrs, x(2), x(3)), x(4), x(5), x(6), y);
      return {};
    case OpKind::TopK:
      kernels::top_k(x(0), normalized(attrs.integer("dim"), x(0).rank()), attrs.integer("k"),
                     {attrs.integer("groups"), attrs.integer("group_k")}, y);
      return {};
    case OpKind::TopKGrad:
      kernels::top_k_grad(x(0), x(1), normalized(attrs.integer("dim"), x(1).rank()), attrs.integer("k"),
                          {attrs.integer("groups"), attrs.integer("group_k")}, y);
      return {};
    case OpKind::CountNonzero: kernels::count_nonzero(x(0), attrs.ints("dims"), y); return {};
    case OpKind::Dispatch: kernels::dispatch(x(0), x(1), attrs.boolean("weighted"), y); return {};
    case OpKind::Combine: kernels::combine(x(0), x(1), attrs.boolean("weighted"), y); return {};
    case OpKind::CombineGateGrad: kernels::combine_gate_grad(x(0), x(1), x(2), y); return {};
    case OpKind::Sgd: kernels::sgd(x(0), x(1), attrs.real("lr"), attrs.real("weight_decay"), y); return {};
    case OpKind::Adam: {
      kernels::AdamParams p{attrs.real("lr"),  attrs.real("beta1"),        attrs.real("beta2"),
                            attrs.real("eps"), attrs.real("weight_decay"), attrs.integer("step") + ctx.steps_before};
      kernels::adam(x(0), x(1), x(2), x(3), p, out[0], out[1], out[2]);
      return {};
    }
    case OpKind::Accumulate: kernels::accumulate(x(0), x(1), y); return {};
    default: return fmt::format("{} is not a compute op", ir::op_name(ctx.op.kind));
  }
}

}  // namespace dstc::reference
