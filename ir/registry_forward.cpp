// Forward compute ops: signatures, shape rules, costs.
#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/ranges.h>

#include "ir/fp8_scales.h"
#include "ir/pointwise_ops.h"
#include "ir/registry_rules.h"

namespace dstc::ir::rules {

namespace {

using Types = std::vector<TensorType>;
using Results = std::span<const TensorType>;

bool matmul_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& a = ctx.operands[0];
  const TensorType& b = ctx.operands[1];
  if (a.rank < 2 || b.rank < 2) return fail(error, "matmul operands need rank >= 2, got {} and {}", str(a), str(b));
  if (a.dtype != b.dtype) return fail(error, "matmul operands differ in dtype: {} and {}", str(a), str(b));
  bool ta = ctx.attrs.boolean("transpose_a");
  bool tb = ctx.attrs.boolean("transpose_b");
  int64_t m = ta ? a.dim(a.rank - 1) : a.dim(a.rank - 2);
  int64_t k = ta ? a.dim(a.rank - 2) : a.dim(a.rank - 1);
  int64_t kb = tb ? b.dim(b.rank - 1) : b.dim(b.rank - 2);
  int64_t n = tb ? b.dim(b.rank - 2) : b.dim(b.rank - 1);
  if (k != kb) return fail(error, "matmul contracts {} with {}: inner sizes {} and {} differ", str(a), str(b), k, kb);
  if (b.rank > 2 && (b.rank != a.rank || !std::equal(a.dims.begin(), a.dims.begin() + a.rank - 2, b.dims.begin())))
    return fail(error, "matmul batch dimensions of {} and {} differ", str(a), str(b));
  TensorType r = a;
  r.dims[static_cast<size_t>(a.rank - 2)] = m;
  r.dims[static_cast<size_t>(a.rank - 1)] = n;
  out.push_back(r);
  return true;
}

OpCost matmul_cost(const OpContext& ctx, Results results) {
  const TensorType& a = ctx.operands[0];
  int64_t k = ctx.attrs.boolean("transpose_a") ? a.dim(a.rank - 2) : a.dim(a.rank - 1);
  return {2.0 * static_cast<double>(results[0].numel()) * static_cast<double>(k), traffic(ctx, results)};
}

// An einsum spec "ab,bc->ac": terms of single-letter dims per operand, as
// views into the interned attribute. Fixed-size storage: lowering and the
// simulator read a spec for every einsum they build or price.
struct EinsumSpec {
  static constexpr size_t kMaxOperands = 8;
  std::array<std::string_view, kMaxOperands> inputs;
  size_t input_count = 0;
  std::string_view output;
};

// Sizes of the spec's letters; -1: not seen.
using EinsumSizes = std::array<int64_t, 128>;

bool parse_einsum(std::string_view spec, size_t operands, EinsumSpec& parsed, std::string& error) {
  size_t arrow = spec.find("->");
  if (arrow == std::string_view::npos) return fail(error, "einsum spec \"{}\" has no \"->\"", spec);
  std::string_view lhs = spec.substr(0, arrow);
  parsed.output = spec.substr(arrow + 2);
  size_t start = 0;
  size_t terms = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    if (terms < EinsumSpec::kMaxOperands)
      parsed.inputs[terms] = lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start);
    ++terms;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (terms != operands)
    return fail(error, "einsum spec \"{}\" names {} operands, the op has {}", spec, terms, operands);
  if (terms > EinsumSpec::kMaxOperands)
    return fail(error, "einsum spec \"{}\" has more than {} operands", spec, EinsumSpec::kMaxOperands);
  parsed.input_count = terms;
  auto letters_ok = [](std::string_view t) {
    return std::all_of(t.begin(), t.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  };
  for (size_t i = 0; i < terms; ++i) {
    if (!letters_ok(parsed.inputs[i])) return fail(error, "einsum spec \"{}\": dimensions are single letters", spec);
  }
  if (!letters_ok(parsed.output)) return fail(error, "einsum spec \"{}\": dimensions are single letters", spec);
  return true;
}

bool einsum_sizes(const OpContext& ctx, EinsumSpec& spec, EinsumSizes& sizes, std::string& error) {
  if (!parse_einsum(ctx.attrs.string("spec"), ctx.operands.size(), spec, error)) return false;
  sizes.fill(-1);
  for (size_t i = 0; i < spec.input_count; ++i) {
    const TensorType& t = ctx.operands[i];
    std::string_view term = spec.inputs[i];
    if (term.size() != t.rank)
      return fail(error, "einsum term \"{}\" has {} dimensions, operand {} is {}", term, term.size(), i + 1, str(t));
    for (size_t d = 0; d < term.size(); ++d) {
      int64_t& size = sizes[static_cast<unsigned char>(term[d])];
      if (size >= 0 && size != t.dims[d])
        return fail(error, "einsum dimension '{}' is {} in one operand and {} in another", term[d], size, t.dims[d]);
      size = t.dims[d];
    }
  }
  return true;
}

bool einsum_shape(const OpContext& ctx, Types& out, std::string& error) {
  EinsumSpec spec;
  EinsumSizes sizes;
  if (!einsum_sizes(ctx, spec, sizes, error)) return false;
  // FP8 operands may mix formats (e4m3 activations and weights, e5m2
  // gradients) and name their result's dtype: FP8 GEMMs write bf16.
  bool fp8 = is_fp8(ctx.operands[0].dtype) && (ctx.operands.size() == 1 || is_fp8(ctx.operands[1].dtype));
  if (ctx.operands.size() == 2 && ctx.operands[0].dtype != ctx.operands[1].dtype && !fp8)
    return fail(error, "einsum operands differ in dtype: {} and {}", str(ctx.operands[0]), str(ctx.operands[1]));
  if (spec.output.size() > kMaxRank) return fail(error, "einsum output has more than {} dimensions", kMaxRank);
  TensorType r;
  r.dtype = ctx.operands[0].dtype;
  if (std::string_view named = ctx.attrs.string("dtype"); !named.empty()) {
    std::optional<DType> dtype = parse_dtype(named);
    if (!dtype || !is_float(*dtype) || is_fp8(*dtype))
      return fail(error, "an einsum's dtype is the float it writes (f32, bf16, f16), not \"{}\"", named);
    r.dtype = *dtype;
  } else if (fp8) {
    return fail(error, "an einsum of fp8 operands names the dtype it writes (dtype = \"bf16\")");
  }
  r.rank = static_cast<uint8_t>(spec.output.size());
  for (size_t d = 0; d < spec.output.size(); ++d) {
    int64_t size = sizes[static_cast<unsigned char>(spec.output[d])];
    if (size < 0) return fail(error, "einsum output dimension '{}' is in no operand", spec.output[d]);
    r.dims[d] = size;
  }
  out.push_back(r);
  return true;
}

// Every distinct dimension is iterated once; a product of two operands is a
// multiply and an add per point.
OpCost einsum_cost(const OpContext& ctx, Results results) {
  EinsumSpec spec;
  EinsumSizes sizes;
  std::string error;
  if (!einsum_sizes(ctx, spec, sizes, error)) return {0, traffic(ctx, results)};
  double points = 1;
  for (size_t i = 0; i < spec.input_count; ++i)
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      // Each distinct letter once: its first occurrence.
      char letter = spec.inputs[i][d];
      bool first = spec.inputs[i].find(letter) == d;
      for (size_t j = 0; j < i && first; ++j) first = spec.inputs[j].find(letter) == std::string_view::npos;
      if (first) points *= static_cast<double>(sizes[static_cast<unsigned char>(letter)]);
    }
  return {(ctx.operands.size() == 2 ? 2.0 : 1.0) * points, traffic(ctx, results)};
}

// a op b where b equals a's trailing dimensions (a bias, a scalar) or all of a.
bool binary_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& a = ctx.operands[0];
  const TensorType& b = ctx.operands[1];
  if (a.dtype != b.dtype) return fail(error, "operands differ in dtype: {} and {}", str(a), str(b));
  if (b.rank > a.rank || !std::equal(b.dims.begin(), b.dims.begin() + b.rank, a.dims.begin() + (a.rank - b.rank)))
    return fail(error, "operand 2 ({}) must equal the trailing dimensions of operand 1 ({})", str(b), str(a));
  out.push_back(a);
  return true;
}

bool float_unary_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!require_float(ctx.operands[0], "the operand", error)) return false;
  out.push_back(ctx.operands[0]);
  return true;
}

bool softmax_shape(const OpContext& ctx, Types& out, std::string& error) {
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, ctx.operands[0].rank, error)) return false;
  return float_unary_shape(ctx, out, error);
}

// Normalizes over the last dimension; gamma and beta have its size.
bool layernorm_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "the input", error)) return false;
  if (x.rank < 1) return fail(error, "layernorm needs rank >= 1, got {}", str(x));
  TensorType param(x.dtype, {x.dim(x.rank - 1)});
  for (size_t i = 1; i < ctx.operands.size(); ++i) {
    if (!(ctx.operands[i] == param))
      return fail(error, "operand {} has type {}, expected {}", i + 1, str(ctx.operands[i]), str(param));
  }
  out.push_back(x);
  return true;
}

bool dropout_shape(const OpContext& ctx, Types& out, std::string& error) {
  double p = ctx.attrs.real("p");
  if (!(p >= 0 && p < 1)) return fail(error, "dropout probability p = {} is not in [0, 1)", p);
  if (!require_float(ctx.operands[0], "the input", error)) return false;
  out.push_back(ctx.operands[0]);
  out.push_back(TensorType(DType::U8, ctx.operands[0].shape()));
  return true;
}

bool embedding_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& table = ctx.operands[0];
  const TensorType& ids = ctx.operands[1];
  if (!require_rank(table, 2, "the embedding table", error) || !require_integer(ids, "the indices", error))
    return false;
  if (ids.rank + 1 > kMaxRank) return fail(error, "indices {} have too many dimensions", str(ids));
  TensorType r(table.dtype, ids.shape());
  r.dims[r.rank++] = table.dim(1);
  out.push_back(r);
  return true;
}

OpCost gather_cost(const OpContext& ctx, Results results) { return {0, traffic(ctx, results)}; }

bool cross_entropy_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& logits = ctx.operands[0];
  const TensorType& labels = ctx.operands[1];
  if (!require_float(logits, "the logits", error) || !require_integer(labels, "the labels", error)) return false;
  if (logits.rank < 1 || labels.rank != logits.rank - 1 ||
      !std::equal(labels.dims.begin(), labels.dims.begin() + labels.rank, logits.dims.begin()))
    return fail(error, "labels {} must have the shape of logits {} without its last dimension", str(labels),
                str(logits));
  std::string_view reduction = ctx.attrs.string("reduction");
  if (reduction != "mean" && reduction != "sum")
    return fail(error, "reduction must be \"mean\" or \"sum\", not \"{}\"", reduction);
  out.push_back(TensorType(DType::F32, std::span<const int64_t>{}));
  return true;
}

// The vocabulary-parallel cross-entropy (Megatron-LM's
// vocab_parallel_cross_entropy, torchtitan's loss_parallel) on a shard of
// the classes: x[..., c] holds classes [offset, offset + c) of the logits
// (the offset from x's layout), m[...] is the rows' maximum over all
// classes. cross_entropy_parts gives s = sum over the shard of exp(x - m)
// and p = x[label] - m where the label is in the shard, else 0: both add up
// over the shards. cross_entropy_total(s, p) is then the summed loss,
// sum of log(s) - p.
bool cross_entropy_parts_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  const TensorType& m = ctx.operands[1];
  const TensorType& labels = ctx.operands[2];
  if (!require_float(x, "the logits", error) || !require_integer(labels, "the labels", error)) return false;
  TensorType rows(DType::F32, std::span<const int64_t>(x.dims.data(), x.rank > 0 ? x.rank - 1 : 0));
  if (x.rank < 1 || !(TensorType(DType::F32, labels.shape()) == rows) || !(TensorType(DType::F32, m.shape()) == rows))
    return fail(error, "labels {} and maxima {} must have the shape of logits {} without its last dimension",
                str(labels), str(m), str(x));
  out.push_back(rows);
  out.push_back(rows);
  return true;
}

bool cross_entropy_total_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!(ctx.operands[0].shape().size() == ctx.operands[1].shape().size() &&
        std::equal(ctx.operands[0].shape().begin(), ctx.operands[0].shape().end(), ctx.operands[1].shape().begin())))
    return fail(error, "s {} and p {} differ in shape", str(ctx.operands[0]), str(ctx.operands[1]));
  out.push_back(TensorType(DType::F32, std::span<const int64_t>{}));
  return true;
}

bool rope_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "x", error)) return false;
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, x.rank, error)) return false;
  if (dim == x.rank - 1 || x.dim(x.rank - 1) % 2 != 0)
    return fail(error, "rope rotates pairs of the last dim of {} by positions along another, not dim {}", str(x), dim);
  out.push_back(x);
  return true;
}

// q, k and v, and in inference the keys' and values' caches. A whole
// cache holds the `context` earlier positions and the step's; a shard of
// one (attention_part) any run of them.
bool attention_operands(const OpContext& ctx, bool whole_cache, std::string& error) {
  const TensorType& q = ctx.operands[0];
  const TensorType& k = ctx.operands[1];
  const TensorType& v = ctx.operands[2];
  if (!require_rank(q, 4, "q", error) || !require_rank(k, 4, "k", error) || !require_rank(v, 4, "v", error))
    return false;
  if (!require_float(q, "q", error)) return false;
  if (q.dtype != k.dtype || q.dtype != v.dtype) return fail(error, "q, k and v differ in dtype");
  // Grouped-query attention: k and v may have fewer heads, each shared by
  // a contiguous group of q's (GQA; one head: MQA).
  if (k.dim(0) != q.dim(0) || v.dim(0) != q.dim(0) || v.dim(1) != k.dim(1) || k.dim(1) < 1 || q.dim(1) % k.dim(1) != 0)
    return fail(error, "q {}, k {} and v {} differ in batch, or k's heads do not divide q's", str(q), str(k), str(v));
  if (k.dim(3) != q.dim(3)) return fail(error, "q {} and k {} differ in head size", str(q), str(k));
  if (v.dim(2) != k.dim(2)) return fail(error, "k {} and v {} differ in key length", str(k), str(v));
  // A KV cache (inference): k and v's earlier positions, held across steps.
  if (ctx.operands.size() > 3) {
    if (ctx.operands.size() != 5) return fail(error, "a KV cache is two operands, the keys' and the values'");
    const int64_t context = ctx.attrs.integer("context");
    if (context < 0) return fail(error, "context {} is negative", context);
    // A prefill under context parallelism: each rank stores its shard.
    const int64_t shards = whole_cache ? ctx.attrs.integer("cache_shards") : 1;
    if (shards < 1) return fail(error, "cache_shards {} is not positive", shards);
    for (size_t i = 3; i < 5; ++i) {
      const TensorType& cache = ctx.operands[i];
      const TensorType& like = i == 3 ? k : v;
      if (cache.rank != 4 || cache.dtype != like.dtype || cache.dim(0) != like.dim(0) || cache.dim(1) != like.dim(1) ||
          cache.dim(3) != like.dim(3))
        return fail(error, "the {} cache {} is not shaped as {} with another length", i == 3 ? "keys'" : "values'",
                    str(cache), str(like));
      if (whole_cache && cache.dim(2) * shards < context + like.dim(2))
        return fail(error, "the cache {} holds fewer than its {} earlier positions and the step's {}", str(cache),
                    context, like.dim(2));
    }
    if (whole_cache && shards > 1 && context > 0)
      return fail(error,
                  "a cache split in {} shards holds only some of the {} earlier positions, which attention "
                  "reads whole (attention_part reads a shard)",
                  shards, context);
  } else if (!whole_cache) {
    return fail(error, "attention_part attends over a shard of a KV cache, and has none");
  } else if (ctx.attrs.integer("context") != 0) {
    return fail(error, "earlier positions (context = {}) need a KV cache", ctx.attrs.integer("context"));
  }
  return true;
}

bool attention_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!attention_operands(ctx, true, error)) return false;
  TensorType r = ctx.operands[0];
  r.dims[3] = ctx.operands[2].dim(3);
  out.push_back(r);
  return true;
}

// Attention over the positions one shard of a split KV cache holds (the
// cache's layout gives which), as decode context parallelism runs it:
// o [1, b, h, s, dv], normalised over those positions, and its
// log-sum-exp f32 [1, b, h, s] (-inf where none is visible). Dim 0 is the
// shard, so the shards' states stack along it for attention_merge.
bool attention_part_shape(const OpContext& ctx, Types& out, std::string& error) {
  if (!attention_operands(ctx, false, error)) return false;
  const TensorType& q = ctx.operands[0];
  std::array<int64_t, 5> o{1, q.dim(0), q.dim(1), q.dim(2), ctx.operands[2].dim(3)};
  out.push_back(TensorType(q.dtype, std::span<const int64_t>(o)));
  out.push_back(TensorType(DType::F32, std::span<const int64_t>(o.data(), 4)));
  return true;
}

// The shards' states o [n, b, h, s, dv] and lse [n, b, h, s] merged into
// the attention over all their positions: each o weighted by
// exp(lse - max lse) over the weights' sum (flash-decoding's merge).
bool attention_merge_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& o = ctx.operands[0];
  const TensorType& lse = ctx.operands[1];
  if (!require_rank(o, 5, "o", error) || !require_rank(lse, 4, "lse", error)) return false;
  if (!require_float(o, "o", error)) return false;
  if (lse.dtype != DType::F32 || !std::equal(lse.shape().begin(), lse.shape().end(), o.shape().begin()))
    return fail(error, "lse {} must be f32 and shaped as o {} without its last dim", str(lse), str(o));
  out.push_back(TensorType(o.dtype, o.shape().subspan(1)));
  return true;
}

// QK^T and PV: 2*b*h*s*t*(d + dv); a causal mask skips half of it. With a
// KV cache every query also sees the `context` cached positions, which are
// read from the cache; the step's k and v are written into it in place, so
// the cache's other positions cost nothing.
OpCost attention_cost(const OpContext& ctx, Results results) {
  const TensorType& q = ctx.operands[0];
  const TensorType& k = ctx.operands[1];
  const TensorType& v = ctx.operands[2];
  double bhst = static_cast<double>(q.dim(0) * q.dim(1) * q.dim(2) * v.dim(2));
  double flops = 2 * bhst * static_cast<double>(q.dim(3) + v.dim(3));
  if (ctx.attrs.boolean("causal")) flops /= 2;
  if (ctx.operands.size() < 5) return {flops, traffic(ctx, results)};
  const auto context = static_cast<double>(ctx.attrs.integer("context"));
  flops += 2 * static_cast<double>(q.dim(0) * q.dim(1) * q.dim(2)) * context * static_cast<double>(q.dim(3) + v.dim(3));
  auto bytes = static_cast<double>(q.bytes() + 2 * (k.bytes() + v.bytes()) + results[0].bytes());
  for (size_t i = 3; i < 5; ++i)
    bytes += static_cast<double>(ctx.operands[i].bytes()) * context / static_cast<double>(ctx.operands[i].dim(2));
  return {flops, bytes};
}

// The fullest shard's work: its cache positions (at most the context and
// the step's) read and attended by every query, the step's k and v
// written, o and lse written. Decode's queries see every position, so no
// causal halving.
OpCost attention_part_cost(const OpContext& ctx, Results results) {
  const TensorType& q = ctx.operands[0];
  const TensorType& k = ctx.operands[1];
  const TensorType& v = ctx.operands[2];
  const TensorType& cache = ctx.operands[3];
  const int64_t context = ctx.attrs.integer("context");
  const auto held = static_cast<double>(std::min(cache.dim(2), context + k.dim(2)));
  const auto cached = static_cast<double>(std::min(cache.dim(2), context));
  double flops =
      2 * static_cast<double>(q.dim(0) * q.dim(1) * q.dim(2)) * held * static_cast<double>(q.dim(3) + v.dim(3));
  double bytes = static_cast<double>(q.bytes() + 2 * (k.bytes() + v.bytes()) + results[0].bytes() + results[1].bytes());
  for (size_t i = 3; i < 5; ++i)
    bytes += static_cast<double>(ctx.operands[i].bytes()) * cached / static_cast<double>(ctx.operands[i].dim(2));
  return {flops, bytes};
}

// Two spatial values of an attribute (stride, padding, kernel), or `fallback`.
bool pair_attr(const OpContext& ctx, std::string_view name, std::array<int64_t, 2> fallback, std::array<int64_t, 2>& v,
               std::string& error) {
  std::span<const int64_t> list = ctx.attrs.ints(name);
  if (list.empty()) {
    v = fallback;
    return true;
  }
  if (list.size() != 2) return fail(error, "attribute '{}' needs 2 values, got {}", name, list.size());
  v = {list[0], list[1]};
  return true;
}

}  // namespace

bool conv_geometry(const OpContext& ctx, const TensorType& x, const TensorType& w, TensorType& y, std::string& error) {
  if (!require_rank(x, 4, "the input", error) || !require_rank(w, 4, "the filter", error)) return false;
  std::array<int64_t, 2> stride{}, padding{};
  if (!pair_attr(ctx, "stride", {1, 1}, stride, error) || !pair_attr(ctx, "padding", {0, 0}, padding, error))
    return false;
  int64_t groups = ctx.attrs.integer("groups");
  if (groups < 1 || x.dim(1) != w.dim(1) * groups || w.dim(0) % groups != 0)
    return fail(error, "input {} and filter {} do not match in channels (groups = {})", str(x), str(w), groups);
  int64_t oh = (x.dim(2) + 2 * padding[0] - w.dim(2)) / std::max<int64_t>(stride[0], 1) + 1;
  int64_t ow = (x.dim(3) + 2 * padding[1] - w.dim(3)) / std::max<int64_t>(stride[1], 1) + 1;
  if (stride[0] < 1 || stride[1] < 1 || oh < 1 || ow < 1)
    return fail(error, "filter {} does not fit input {} with this stride and padding", str(w), str(x));
  y = TensorType(x.dtype, {x.dim(0), w.dim(0), oh, ow});
  return true;
}

OpCost conv_cost(const OpContext& ctx, const TensorType& y, const TensorType& w, Results results) {
  double per_output = static_cast<double>(w.dim(1) * w.dim(2) * w.dim(3));
  return {2.0 * static_cast<double>(y.numel()) * per_output, traffic(ctx, results)};
}

bool pool_geometry(const OpContext& ctx, const TensorType& x, TensorType& y, std::string& error) {
  if (!require_rank(x, 4, "the input", error)) return false;
  std::array<int64_t, 2> kernel{}, stride{}, padding{};
  if (!pair_attr(ctx, "kernel", {0, 0}, kernel, error) || !pair_attr(ctx, "stride", kernel, stride, error) ||
      !pair_attr(ctx, "padding", {0, 0}, padding, error))
    return false;
  if (kernel[0] < 1 || kernel[1] < 1 || stride[0] < 1 || stride[1] < 1)
    return fail(error, "pooling needs a positive kernel and stride");
  int64_t oh = (x.dim(2) + 2 * padding[0] - kernel[0]) / stride[0] + 1;
  int64_t ow = (x.dim(3) + 2 * padding[1] - kernel[1]) / stride[1] + 1;
  if (oh < 1 || ow < 1) return fail(error, "pooling window does not fit input {}", str(x));
  y = TensorType(x.dtype, {x.dim(0), x.dim(1), oh, ow});
  return true;
}

namespace {

bool conv2d_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType y;
  if (!conv_geometry(ctx, ctx.operands[0], ctx.operands[1], y, error)) return false;
  out.push_back(y);
  return true;
}

bool pool_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType y;
  if (!pool_geometry(ctx, ctx.operands[0], y, error)) return false;
  out.push_back(y);
  return true;
}

OpCost pool_cost(const OpContext& ctx, Results results) {
  std::span<const int64_t> kernel = ctx.attrs.ints("kernel");
  double window = kernel.size() == 2 ? static_cast<double>(kernel[0] * kernel[1]) : 1;
  return {window * static_cast<double>(results[0].numel()), traffic(ctx, results)};
}

// Statistics per channel (dimension 1) over every other dimension.
bool batchnorm_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "the input", error)) return false;
  if (x.rank < 2) return fail(error, "batchnorm needs rank >= 2, got {}", str(x));
  TensorType param(x.dtype, {x.dim(1)});
  for (size_t i = 1; i < 3; ++i) {
    if (!(ctx.operands[i] == param))
      return fail(error, "operand {} has type {}, expected {}", i + 1, str(ctx.operands[i]), str(param));
  }
  out.push_back(x);
  return true;
}

bool slice_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType r = ctx.operands[0];
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, r.rank, error)) return false;
  int64_t start = ctx.attrs.integer("start");
  int64_t end = ctx.attrs.integer("end");
  if (start < 0 || end > r.dims[static_cast<size_t>(dim)] || start >= end)
    return fail(error, "slice {}..{} is outside dimension {} of {}", start, end, dim, str(r));
  r.dims[static_cast<size_t>(dim)] = end - start;
  out.push_back(r);
  return true;
}

// This device's chunk of `parts` along `dim`, picked by its coordinate on
// mesh axis `axis` (B -> S boxing).
// flat = true: this device's chunk of the flattened, zero-padded tensor
// (B -> S(flat) boxing); `span` (bits, 0: `axis` alone): the mesh axes it
// flattens over, the chunk picked by the device's coordinates on them,
// earlier axes more significant.
bool shard_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType r = ctx.operands[0];
  if (ctx.attrs.boolean("flat")) {
    int64_t parts = ctx.attrs.integer("parts");
    if (parts < 1) return fail(error, "shard into {} parts", parts);
    out.push_back(TensorType(r.dtype, {flat_chunk(r.numel(), parts)}));
    return true;
  }
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, r.rank, error)) return false;
  int64_t parts = ctx.attrs.integer("parts");
  if (parts < 1 || r.dims[static_cast<size_t>(dim)] % parts != 0)
    return fail(error, "shard into {} parts does not divide dimension {} of {}", parts, dim, str(r));
  r.dims[static_cast<size_t>(dim)] /= parts;
  out.push_back(r);
  return true;
}

// The inverse placement of shard: a tensor `parts` times longer along `dim`
// holding this device's chunk at its coordinate on mesh axis `axis` and
// zeros elsewhere (S -> P boxing).
bool unshard_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType r = ctx.operands[0];
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, r.rank, error)) return false;
  int64_t parts = ctx.attrs.integer("parts");
  if (parts < 1) return fail(error, "unshard into {} parts", parts);
  r.dims[static_cast<size_t>(dim)] *= parts;
  out.push_back(r);
  return true;
}

bool concat_shape(const OpContext& ctx, Types& out, std::string& error) {
  TensorType r = ctx.operands[0];
  int64_t dim = ctx.attrs.integer("dim");
  if (!normalize_dim(dim, r.rank, error)) return false;
  auto d = static_cast<size_t>(dim);
  for (size_t i = 1; i < ctx.operands.size(); ++i) {
    TensorType t = ctx.operands[i];
    int64_t extent = t.dims[d];
    t.dims[d] = r.dims[d];
    if (!(t == r))
      return fail(error, "operand {} ({}) does not match operand 1 ({}) outside dimension {}", i + 1,
                  str(ctx.operands[i]), str(ctx.operands[0]), dim);
    r.dims[d] += extent;
  }
  out.push_back(r);
  return true;
}

bool reshape_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  std::span<const int64_t> shape = ctx.attrs.ints("shape");
  if (shape.size() > kMaxRank) return fail(error, "shape has more than {} dimensions", kMaxRank);
  TensorType r(x.dtype, shape);
  int64_t known = 1;
  int inferred = -1;
  for (int i = 0; i < r.rank; ++i) {
    if (r.dim(i) == -1 && inferred < 0) {
      inferred = i;
    } else if (r.dim(i) < 0) {
      return fail(error, "shape may hold one -1 and otherwise sizes >= 0");
    } else {
      known *= r.dim(i);
    }
  }
  if (inferred >= 0 && known > 0 && x.numel() % known == 0) r.dims[static_cast<size_t>(inferred)] = x.numel() / known;
  if (r.numel() != x.numel()) return fail(error, "cannot reshape {} ({} elements) to this shape", str(x), x.numel());
  out.push_back(r);
  return true;
}

bool transpose_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  std::span<const int64_t> perm = ctx.attrs.ints("perm");
  std::vector<bool> used(x.rank, false);
  if (perm.size() != x.rank)
    return fail(error, "perm has {} entries, the operand {} has rank {}", perm.size(), str(x), x.rank);
  TensorType r = x;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= x.rank || used[static_cast<size_t>(perm[i])])
      return fail(error, "perm is not a permutation of 0..{}", x.rank - 1);
    used[static_cast<size_t>(perm[i])] = true;
    r.dims[i] = x.dims[static_cast<size_t>(perm[i])];
  }
  out.push_back(r);
  return true;
}

bool sum_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  std::vector<int64_t> shape;
  if (!reduced_shape(x, ctx.attrs.ints("dims"), ctx.attrs.boolean("keepdim"), shape, error)) return false;
  out.emplace_back(x.dtype, shape);
  return true;
}

OpCost input_elementwise_cost(const OpContext& ctx, Results results) {
  return {static_cast<double>(ctx.operands[0].numel()), traffic(ctx, results)};
}

bool fill_shape(const OpContext& ctx, Types& out, std::string& error) {
  std::optional<DType> dtype = parse_dtype(ctx.attrs.string("dtype"));
  if (!dtype) return fail(error, "unknown dtype \"{}\"", ctx.attrs.string("dtype"));
  std::span<const int64_t> shape = ctx.attrs.ints("shape");
  if (!require_shape(shape, error)) return false;
  out.push_back(TensorType(*dtype, shape));
  return true;
}

bool cast_shape(const OpContext& ctx, Types& out, std::string& error) {
  std::optional<DType> dtype = parse_dtype(ctx.attrs.string("dtype"));
  if (!dtype) return fail(error, "unknown dtype \"{}\"", ctx.attrs.string("dtype"));
  out.push_back(TensorType(*dtype, ctx.operands[0].shape()));
  return true;
}

// FP8 quantization: x scaled into the format's range and rounded, with one
// scale per `block` consecutive elements of the last dim (0: one for the
// tensor), as Transformer Engine's tensorwise and 1x128-block recipes keep.
bool quantize_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "the input", error)) return false;
  std::optional<DType> dtype = parse_dtype(ctx.attrs.string("dtype"));
  if (!dtype || !is_fp8(*dtype))
    return fail(error, "quantize writes f8e4m3 or f8e5m2, not \"{}\"", ctx.attrs.string("dtype"));
  int64_t block = ctx.attrs.integer("block");
  int64_t last = x.rank > 0 ? x.dim(x.rank - 1) : 1;
  if (block < kRowwiseBlock || (block > 0 && last % block != 0))
    return fail(error, "quantize's block ({}) must divide the last dim ({}), or be 0 for one scale, -1 for one a row",
                block, last);
  out.push_back(TensorType(*dtype, x.shape()));
  return true;
}

OpCost no_flops(const OpContext& ctx, Results results) { return {0, traffic(ctx, results)}; }

// Normalizes over the last dimension; the optional gamma has its size.
bool rms_norm_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "the input", error)) return false;
  if (x.rank < 1) return fail(error, "rms_norm needs rank >= 1, got {}", str(x));
  TensorType param(x.dtype, {x.dim(x.rank - 1)});
  if (ctx.operands.size() > 1 && !(ctx.operands[1] == param))
    return fail(error, "operand 2 has type {}, expected {}", str(ctx.operands[1]), str(param));
  out.push_back(x);
  return true;
}

// The inverse of sum over `dims`: the result has `shape`, and x is `shape`
// without the listed dims (increasing), replicated along them.
bool expand_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  std::span<const int64_t> shape = ctx.attrs.ints("shape");
  std::span<const int64_t> dims = ctx.attrs.ints("dims");
  if (!require_shape(shape, error)) return false;
  std::vector<int64_t> kept;
  size_t next = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (next < dims.size() && dims[next] == static_cast<int64_t>(i)) {
      ++next;
      continue;
    }
    kept.push_back(shape[i]);
  }
  if (next != dims.size()) return fail(error, "dims must be increasing positions of the result shape");
  if (!(TensorType(x.dtype, kept) == x))
    return fail(error, "operand {} is not the result shape without dims {}", str(x), fmt::join(dims, ", "));
  out.push_back(TensorType(x.dtype, shape));
  return true;
}

// Per-channel (dimension 1) sum and sum of squares over every other
// dimension, in f32: the statistics a split batch all-reduces.
bool batchnorm_stats_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "the input", error)) return false;
  if (x.rank < 2) return fail(error, "batchnorm needs rank >= 2, got {}", str(x));
  out.push_back(TensorType(DType::F32, {x.dim(1)}));
  out.push_back(TensorType(DType::F32, {x.dim(1)}));
  return true;
}

// (x, sum, sumsq, gamma, beta): normalizes with the given statistics.
bool batchnorm_apply_shape(const OpContext& ctx, Types& out, std::string& error) {
  const TensorType& x = ctx.operands[0];
  if (!require_float(x, "the input", error)) return false;
  if (x.rank < 2) return fail(error, "batchnorm needs rank >= 2, got {}", str(x));
  if (ctx.attrs.integer("count") < 1) return fail(error, "count must be positive");
  TensorType stats(DType::F32, {x.dim(1)});
  TensorType param(x.dtype, {x.dim(1)});
  for (size_t i = 1; i < 5; ++i) {
    const TensorType& want = i < 3 ? stats : param;
    if (!(ctx.operands[i] == want))
      return fail(error, "operand {} has type {}, expected {}", i + 1, str(ctx.operands[i]), str(want));
  }
  out.push_back(x);
  return true;
}

}  // namespace

void add_forward_ops(std::vector<OpInfo>& t) {
  t.push_back(priced_as(CostClass::Matmul, make_op(OpKind::Matmul, 2, 2, 1,
                                                   {bool_attr("transpose_a", false), bool_attr("transpose_b", false)},
                                                   matmul_shape, matmul_cost)));
  t.back().linearity = Linearity::Product;
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) {
    const int ra = c.operands[0].rank, rb = c.operands[1].rank;
    r.sum(0, c.attrs.boolean("transpose_a") ? ra - 2 : ra - 1);
    r.sum(1, c.attrs.boolean("transpose_b") ? rb - 1 : rb - 2);
  };
  t.push_back(priced_as(CostClass::Matmul,
                        make_op(OpKind::Einsum, 1, 2, 1, {required("spec", AttrType::String), string_attr("dtype", "")},
                                einsum_shape, einsum_cost)));
  t.back().linearity = Linearity::Product;
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) {
    // Letters of an operand's term missing from the output are summed.
    std::string_view spec = c.attrs.string("spec");
    const size_t arrow = spec.find("->");
    std::string_view lhs = spec.substr(0, arrow), output = spec.substr(arrow + 2);
    size_t start = 0;
    for (size_t i = 0; i < c.operands.size(); ++i) {
      const size_t comma = lhs.find(',', start);
      std::string_view term = lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start);
      start = comma + 1;
      for (size_t d = 0; d < term.size(); ++d)
        if (output.find(term[d]) == output.npos) r.sum(i, static_cast<int>(d));
    }
  };
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul}) {
    t.push_back(
        make_op(k, 2, 2, 1, {}, binary_shape, [](const OpContext& c, Results r) { return elementwise_cost(c, r, 1); }));
    t.back().linearity = k == OpKind::Mul ? Linearity::Product : Linearity::Sum;
  }
  t.push_back(make_op(OpKind::Scale, 1, 1, 1, {required("factor", AttrType::Float)}, float_unary_shape,
                      [](const OpContext& c, Results r) { return elementwise_cost(c, r, 1); }));
  t.back().linearity = Linearity::First;
  // Rotary position embedding: x·cos + rotate_half(x)·sin, positions along
  // `dim` from `offset` (a step after cached positions), the last dim
  // rotated in pairs (i, i + d/2); inverse rotates back (its gradient).
  // Three flops per element, the angles computed in place.
  t.push_back(make_op(
      OpKind::Rope, 1, 1, 1,
      {required("dim", AttrType::Int), float_attr("base", 10000), bool_attr("inverse", false), int_attr("offset", 0)},
      rope_shape, [](const OpContext& c, Results r) { return elementwise_cost(c, r, 3); }));
  t.back().linearity = Linearity::First;
  for (const PointwiseOp& p : pointwise_ops()) {
    OpInfo op = make_op(p.kind, 1, 1, 1, {}, float_unary_shape, [](const OpContext& c, Results r) {
      return elementwise_cost(c, r, find_pointwise(c.attrs.kind())->flops);
    });
    t.push_back(std::move(op));
  }
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::Softmax, 1, 1, 1, {int_attr("dim", -1)}, softmax_shape,
                                [](const OpContext& c, Results r) { return elementwise_cost(c, r, 5); })));
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::LayerNorm, 3, 3, 1, {float_attr("eps", 1e-5)}, layernorm_shape,
                                [](const OpContext& c, Results r) { return elementwise_cost(c, r, 8); })));
  t.push_back(make_op(OpKind::Dropout, 1, 1, 2, {required("p", AttrType::Float), int_attr("seed", 0)}, dropout_shape,
                      [](const OpContext& c, Results r) { return elementwise_cost(c, r, 2); }));
  t.back().linearity = Linearity::First;
  // offset_axis >= 0: the table is a vocabulary shard whose first row is
  // (coordinate on that mesh axis) x (local rows); ids outside it give zeros.
  t.push_back(make_op(OpKind::Embedding, 2, 2, 1, {int_attr("offset", 0), int_attr("offset_axis", -1)}, embedding_shape,
                      gather_cost));
  t.back().linearity = Linearity::First;
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) {
    // A vocabulary shard's rows of other shards are zeros.
    const int64_t axis = c.attrs.integer("offset_axis");
    if (axis >= 0 && axis < 32) r.partial_mesh_axes |= 1u << axis;
  };
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::CrossEntropy, 2, 2, 1, {string_attr("reduction", "mean")}, cross_entropy_shape,
                                [](const OpContext& c, Results r) {
                                  return OpCost{5.0 * static_cast<double>(c.operands[0].numel()), traffic(c, r)};
                                })));
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) { r.sum_all(0, c.operands[0].rank); };
  t.push_back(priced_as(
      CostClass::Reduction,
      make_op(OpKind::CrossEntropyParts, 3, 3, 2, {}, cross_entropy_parts_shape, [](const OpContext& c, Results r) {
        return OpCost{3.0 * static_cast<double>(c.operands[0].numel()), traffic(c, r)};
      })));
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) {
    r.sum(0, c.operands[0].rank - 1);  // a shard's parts add up over the classes
  };
  t.push_back(make_op(OpKind::CrossEntropyTotal, 2, 2, 1, {}, cross_entropy_total_shape,
                      [](const OpContext& c, Results r) { return elementwise_cost(c, r, 3); }));
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) { r.sum_all(0, c.operands[0].rank); };
  // Operands q, k, v, and in inference with a KV cache the keys' and the
  // values' caches: `context` earlier positions precede k and v.
  t.push_back(priced_as(CostClass::Matmul, make_op(OpKind::Attention, 3, 5, 1,
                                                   {bool_attr("causal", false), float_attr("scale", 0),
                                                    int_attr("context", 0), int_attr("cache_shards", 1)},
                                                   attention_shape, attention_cost)));
  // Decode context parallelism: attention over one shard of a split KV
  // cache, then the shards' states merged.
  t.push_back(
      priced_as(CostClass::Matmul, make_op(OpKind::AttentionPart, 5, 5, 2,
                                           {bool_attr("causal", false), float_attr("scale", 0), int_attr("context", 0)},
                                           attention_part_shape, attention_part_cost)));
  t.push_back(make_op(OpKind::AttentionMerge, 2, 2, 1, {}, attention_merge_shape, input_elementwise_cost));
  t.push_back(priced_as(
      CostClass::Matmul,
      make_op(OpKind::Conv2d, 2, 2, 1, {list_attr("stride"), list_attr("padding"), int_attr("groups", 1)}, conv2d_shape,
              [](const OpContext& c, Results r) { return conv_cost(c, r[0], c.operands[1], r); })));
  t.back().linearity = Linearity::Product;
  for (OpKind k : {OpKind::MaxPool2d, OpKind::AvgPool2d}) {
    t.push_back(make_op(k, 1, 1, 1, {required("kernel", AttrType::IntList), list_attr("stride"), list_attr("padding")},
                        pool_shape, pool_cost));
    if (k == OpKind::AvgPool2d) t.back().linearity = Linearity::First;
  }
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::BatchNorm, 3, 3, 1, {float_attr("eps", 1e-5)}, batchnorm_shape,
                                [](const OpContext& c, Results r) { return elementwise_cost(c, r, 8); })));
  t.push_back(
      make_op(OpKind::Slice, 1, 1, 1,
              {required("dim", AttrType::Int), required("start", AttrType::Int), required("end", AttrType::Int)},
              slice_shape, no_flops));
  t.back().linearity = Linearity::First;
  t.push_back(make_op(OpKind::Concat, 1, kVariadic, 1, {required("dim", AttrType::Int)}, concat_shape, no_flops));
  t.back().linearity = Linearity::Sum;
  t.push_back(priced_as(CostClass::Free, make_op(OpKind::Reshape, 1, 1, 1, {required("shape", AttrType::IntList)},
                                                 reshape_shape, [](const OpContext&, Results) { return OpCost{}; })));
  t.back().linearity = Linearity::First;
  t.push_back(make_op(OpKind::Transpose, 1, 1, 1, {required("perm", AttrType::IntList)}, transpose_shape, no_flops));
  t.back().linearity = Linearity::First;
  t.push_back(
      priced_as(CostClass::Reduction,
                make_op(OpKind::Sum, 1, 1, 1, {required("dims", AttrType::IntList), bool_attr("keepdim", false)},
                        sum_shape, input_elementwise_cost)));
  t.back().linearity = Linearity::First;
  t.back().reduced = sum_dims_attr;
  t.push_back(make_op(OpKind::Fill, 0, 0, 1,
                      {required("shape", AttrType::IntList), string_attr("dtype", "f32"), float_attr("value", 0)},
                      fill_shape, no_flops));
  t.push_back(make_op(OpKind::Shard, 1, 1, 1,
                      {int_attr("dim", 0), required("parts", AttrType::Int), required("axis", AttrType::Int),
                       bool_attr("flat", false), int_attr("span", 0)},
                      shard_shape, no_flops));
  t.back().linearity = Linearity::First;
  t.push_back(
      make_op(OpKind::Unshard, 1, 1, 1,
              {required("dim", AttrType::Int), required("parts", AttrType::Int), required("axis", AttrType::Int)},
              unshard_shape, no_flops));
  t.back().linearity = Linearity::First;
  // Keeps the value on coordinate 0 of mesh axis `axis`, zeros elsewhere (B -> P boxing).
  t.push_back(make_op(OpKind::Partialize, 1, 1, 1, {required("axis", AttrType::Int)}, float_unary_shape,
                      [](const OpContext& c, Results r) { return elementwise_cost(c, r, 0); }));
  t.back().linearity = Linearity::First;
  t.push_back(make_op(OpKind::Cast, 1, 1, 1, {required("dtype", AttrType::String)}, cast_shape,
                      [](const OpContext& c, Results r) { return elementwise_cost(c, r, 1); }));
  t.back().linearity = Linearity::First;
  // The amax, the scale and the rounding: about three operations an
  // element. One scale for the tensor needs its amax before any element is
  // cast, so x is read twice (Transformer Engine's current scaling); a
  // row's or a block's amax is taken on chip in the one pass. The fp32
  // scales are written beside the elements.
  t.push_back(make_op(OpKind::Quantize, 1, 1, 1, {required("dtype", AttrType::String), int_attr("block", 0)},
                      quantize_shape, [](const OpContext& c, Results r) {
                        OpCost cost = elementwise_cost(c, r, 3);
                        const int64_t block = c.attrs.integer("block");
                        const TensorType& x = c.operands[0];
                        const int64_t row = x.rank > 0 ? x.dim(x.rank - 1) : 1;
                        if (block == 0) cost.bytes += static_cast<double>(x.bytes());
                        const int64_t per_scale = block == kRowwiseBlock ? row : block;
                        cost.bytes += 4.0 * (per_scale > 0 ? static_cast<double>(x.numel() / per_scale) : 1.0);
                        return cost;
                      }));
  t.push_back(make_op(OpKind::Div, 2, 2, 1, {}, binary_shape,
                      [](const OpContext& c, Results r) { return elementwise_cost(c, r, 1); }));
  t.back().linearity = Linearity::First;
  t.push_back(make_op(OpKind::Maximum, 2, 2, 1, {}, binary_shape,
                      [](const OpContext& c, Results r) { return elementwise_cost(c, r, 1); }));
  for (OpKind k : {OpKind::Exp, OpKind::Sqrt})
    t.push_back(make_op(k, 1, 1, 1, {}, float_unary_shape,
                        [](const OpContext& c, Results r) { return elementwise_cost(c, r, 4); }));
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::LogSoftmax, 1, 1, 1, {int_attr("dim", -1)}, softmax_shape,
                                [](const OpContext& c, Results r) { return elementwise_cost(c, r, 5); })));
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::RmsNorm, 1, 2, 1, {float_attr("eps", 1e-5)}, rms_norm_shape,
                                [](const OpContext& c, Results r) { return elementwise_cost(c, r, 5); })));
  t.push_back(
      priced_as(CostClass::Reduction,
                make_op(OpKind::ReduceMax, 1, 1, 1, {required("dims", AttrType::IntList), bool_attr("keepdim", false)},
                        sum_shape, input_elementwise_cost)));
  t.back().reduced = [](const OpContext& c, size_t, ReducedDims& r) {
    // The maximum over a split dim is a partial maximum.
    for (int64_t d : c.attrs.ints("dims")) r.maxed.push_back({0, static_cast<int>(d < 0 ? d + c.operands[0].rank : d)});
  };
  t.push_back(make_op(OpKind::Expand, 1, 1, 1,
                      {required("shape", AttrType::IntList), required("dims", AttrType::IntList)}, expand_shape,
                      no_flops));
  t.back().linearity = Linearity::First;
  t.push_back(priced_as(CostClass::Reduction,
                        make_op(OpKind::BatchNormStats, 1, 1, 2, {int_attr("groups", 1)}, batchnorm_stats_shape,
                                [](const OpContext& c, Results r) {
                                  return OpCost{3.0 * static_cast<double>(c.operands[0].numel()), traffic(c, r)};
                                })));
  t.back().reduced = batch_norm_sums;
  t.push_back(make_op(OpKind::BatchNormApply, 5, 5, 1, {required("count", AttrType::Int), float_attr("eps", 1e-5)},
                      batchnorm_apply_shape, [](const OpContext& c, Results r) { return elementwise_cost(c, r, 4); }));
}

}  // namespace dstc::ir::rules
