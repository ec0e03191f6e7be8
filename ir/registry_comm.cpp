// Communication ops. A collective's local result type follows from its local
// operand type and the size p of its group; its cost is the bytes each
// device sends under a ring algorithm (N = the operand's local bytes).
#include "ir/registry_rules.h"

namespace dstc::ir::rules {

namespace {

using Types = std::vector<TensorType>;
using Results = std::span<const TensorType>;

// all_reduce and reduce_scatter take several operands, each reduced as if
// alone, in one collective (NCCL's grouped calls, DDP's and Megatron's
// gradient buckets): one launch, one latency, the bytes of all.
bool all_reduce_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!require_reduction(ctx.attrs.string("op"), error)) return false;
  out.assign(ctx.operands.begin(), ctx.operands.end());
  return true;
}

double local_bytes(const OpContext& ctx) { return static_cast<double>(ctx.operands[0].bytes()); }
double grouped_bytes(const OpContext& ctx) {
  double bytes = 0;
  for (const TensorType& t : ctx.operands) bytes += static_cast<double>(t.bytes());
  return bytes;
}
double grouped_numel(const OpContext& ctx) {
  double n = 0;
  for (const TensorType& t : ctx.operands) n += static_cast<double>(t.numel());
  return n;
}
double ring_share(const OpContext& ctx) {
  auto p = static_cast<double>(ctx.group_size);
  return p > 0 ? (p - 1) / p : 0;
}

// Multiplies (gather) or divides (scatter) one dimension by the group size.
bool regroup_dim(const OpContext& ctx, std::string_view attr, bool gather, TensorType& t, std::string& error) {
  int64_t dim = ctx.attrs.integer(attr);
  if (!normalize_dim(dim, t.rank, error)) return false;
  int64_t& extent = t.dims[static_cast<size_t>(dim)];
  if (gather) {
    extent *= ctx.group_size;
  } else {
    if (ctx.group_size < 1 || extent % ctx.group_size != 0)
      return fail(error, "dimension {} of {} is not divisible by the group size {}", dim, str(t), ctx.group_size);
    extent /= ctx.group_size;
  }
  return true;
}

bool require_root(const OpContext& ctx, std::string& error) {
  int64_t root = ctx.attrs.integer("root");
  if (root < 0 || root >= ctx.group_size)
    return fail(error, "root {} is not a position in a group of {}", root, ctx.group_size);
  return true;
}

// flat = true: the operand's chunks, concatenated, hold the result's
// elements in order and then padding (S(flat) -> B boxing). Several
// operands (not flat) are gathered in one collective, each as if alone:
// ring attention's keys and values travel together.
bool all_gather_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (ctx.attrs.boolean("flat")) {
    if (ctx.operands.size() != 1) return fail(error, "a flat all_gather gathers one operand");
    TensorType r = ctx.operands[0];
    std::span<const int64_t> shape = ctx.attrs.ints("shape");
    if (shape.empty()) return fail(error, "a flat all_gather needs the result's `shape`");
    if (!require_shape(shape, error)) return false;
    TensorType whole(r.dtype, shape);
    if (r.rank != 1 || flat_chunk(whole.numel(), ctx.group_size) != r.dims[0])
      return fail(error, "a flat all_gather of {} chunks into {} reads chunks of {}, not {}", ctx.group_size,
                  str(whole), flat_chunk(whole.numel(), ctx.group_size), str(r));
    out.push_back(whole);
    return true;
  }
  for (TensorType r : ctx.operands) {
    if (!regroup_dim(ctx, "dim", true, r, error)) return false;
    out.push_back(r);
  }
  return true;
}

// flat = true: the sum, flattened and zero-padded, in equal chunks
// (P -> S(flat) boxing).
bool reduce_scatter_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!require_reduction(ctx.attrs.string("op"), error)) return false;
  for (TensorType r : ctx.operands) {
    if (ctx.attrs.boolean("flat")) {
      out.push_back(TensorType(r.dtype, {flat_chunk(r.numel(), ctx.group_size)}));
      continue;
    }
    if (!regroup_dim(ctx, "dim", false, r, error)) return false;
    out.push_back(r);
  }
  return true;
}

bool all_to_all_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType r = ctx.operands[0];
  if (!regroup_dim(ctx, "split_dim", false, r, error) || !regroup_dim(ctx, "concat_dim", true, r, error)) return false;
  out.push_back(r);
  return true;
}

bool broadcast_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!require_root(ctx, error)) return false;
  out.push_back(ctx.operands[0]);
  return true;
}

bool reduce_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!require_root(ctx, error) || !require_reduction(ctx.attrs.string("op"), error)) return false;
  out.push_back(ctx.operands[0]);
  return true;
}

bool scatter_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType r = ctx.operands[0];
  if (!require_root(ctx, error) || !regroup_dim(ctx, "dim", false, r, error)) return false;
  out.push_back(r);
  return true;
}

bool gather_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType r = ctx.operands[0];
  if (!require_root(ctx, error) || !regroup_dim(ctx, "dim", true, r, error)) return false;
  out.push_back(r);
  return true;
}

bool send_shape(const OpContext&, Types&, std::string&) { return true; }

}  // namespace

void add_communication_ops(std::vector<OpInfo>& t) {
  constexpr auto kP2P = OpCategory::PointToPoint;
  constexpr auto kColl = OpCategory::Collective;
  t.push_back(make_op(
      OpKind::Send, 1, 1, 0, {}, send_shape,
      [](const OpContext& c, Results) {
        return OpCost{0, local_bytes(c)};
      },
      kP2P));
  t.push_back(make_op(
      OpKind::Recv, 0, 0, 1, {}, nullptr, [](const OpContext&, Results) { return OpCost{}; }, kP2P));
  t.push_back(make_op(
      OpKind::AllReduce, 1, kVariadic, kPerOperand, {string_attr("op", "sum")}, all_reduce_shape,
      [](const OpContext& c, Results) {
        return OpCost{ring_share(c) * grouped_numel(c), 2 * ring_share(c) * grouped_bytes(c)};
      },
      kColl));
  t.push_back(make_op(
      OpKind::AllGather, 1, kVariadic, kPerOperand,
      {int_attr("dim", 0), bool_attr("flat", false), list_attr("shape"), int_attr("chunks", 1),
       bool_attr("in_place", false)},
      all_gather_shape,
      [](const OpContext& c, Results) {
        return OpCost{0, static_cast<double>(c.group_size - 1) * grouped_bytes(c)};
      },
      kColl));
  t.push_back(make_op(
      OpKind::ReduceScatter, 1, kVariadic, kPerOperand,
      {int_attr("dim", 0), string_attr("op", "sum"), bool_attr("flat", false), int_attr("chunks", 1)},
      reduce_scatter_shape,
      [](const OpContext& c, Results) {
        return OpCost{ring_share(c) * grouped_numel(c), ring_share(c) * grouped_bytes(c)};
      },
      kColl));
  // `copies` > 1: the values are experts' slots holding each token `copies`
  // times (its top-k) among `experts`, and the exchange sends a token once
  // per destination node and GPU (DeepEP); 0: every slot travels.
  // `groups` > 0: the experts come from `group_k` of that many groups
  // (node-limited routing).
  t.push_back(make_op(
      OpKind::AllToAll, 1, 1, 1,
      {int_attr("split_dim", 0), int_attr("concat_dim", 0), int_attr("copies", 0), int_attr("experts", 0),
       int_attr("groups", 0), int_attr("group_k", 0)},
      all_to_all_shape,
      [](const OpContext& c, Results) {
        return OpCost{0, ring_share(c) * local_bytes(c)};
      },
      kColl));
  t.push_back(make_op(
      OpKind::Broadcast, 1, 1, 1, {int_attr("root", 0)}, broadcast_shape,
      [](const OpContext& c, Results) {
        return OpCost{0, local_bytes(c)};
      },
      kColl));
  t.push_back(make_op(
      OpKind::Reduce, 1, 1, 1, {int_attr("root", 0), string_attr("op", "sum")}, reduce_shape,
      [](const OpContext& c, Results) {
        return OpCost{static_cast<double>(c.operands[0].numel()), local_bytes(c)};
      },
      kColl));
  t.push_back(make_op(
      OpKind::Scatter, 1, 1, 1, {int_attr("root", 0), int_attr("dim", 0)}, scatter_shape,
      [](const OpContext& c, Results) {
        return OpCost{0, ring_share(c) * local_bytes(c)};
      },
      kColl));
  t.push_back(make_op(
      OpKind::Gather, 1, 1, 1, {int_attr("root", 0), int_attr("dim", 0)}, gather_shape,
      [](const OpContext& c, Results) {
        return OpCost{0, local_bytes(c)};
      },
      kColl));
}

}  // namespace dstc::ir::rules
