// The numerical kernels of the reference executor, one per IR op kind
// (docs/ir.md gives the semantics; docs/verify.md the choices the IR leaves
// open). Each writes into `out`, already shaped by the IR's result type and
// zero-filled; operand shapes were checked by the IR verifier. Arithmetic is
// in double; the executor rounds the results to its storage precision.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "backends/reference/host_tensor.h"
#include "ir/pointwise_ops.h"

namespace dstc::reference::kernels {

// --- forward compute ---
void einsum(std::string_view spec, std::span<const HostTensor* const> in, HostTensor& out);
void matmul(const HostTensor& a, const HostTensor& b, bool transpose_a, bool transpose_b, HostTensor& out);
enum class Binary : uint8_t { Add, Sub, Mul, Div, Max };
// b is a's trailing dims, broadcast over the leading ones.
void binary(Binary op, const HostTensor& a, const HostTensor& b, HostTensor& out);
void scale(const HostTensor& x, double factor, HostTensor& out);
// Rotary position embedding: pairs (i, i + d/2) of the last dim rotated by
// (first_position + index along dim) · base^(-2i/d); inverse: back.
void rope(const HostTensor& x, int dim, double base, bool inverse, int64_t first_position, HostTensor& out);
// The activation `op` (ir/pointwise_ops.def), element by element.
void pointwise(const ir::PointwiseOp& op, const HostTensor& x, HostTensor& out);
void softmax(const HostTensor& x, int dim, HostTensor& out);
void log_softmax(const HostTensor& x, int dim, HostTensor& out);
enum class Unary : uint8_t { Exp, Sqrt };
void unary(Unary op, const HostTensor& x, HostTensor& out);
// gamma null: scale 1.
void rms_norm(const HostTensor& x, const HostTensor* gamma, double eps, HostTensor& out);
void layernorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta, double eps, HostTensor& out);
// Where the local tensor sits in the logical one: the mask of element i
// depends on (seed, its row-major index in `logical_shape`).
struct LogicalPlacement {
  std::span<const int64_t> logical_shape;
  std::span<const int64_t> offset;
};
void dropout(const HostTensor& x, double p, uint64_t seed, const LogicalPlacement& where, HostTensor& y,
             HostTensor& mask);
void embedding(const HostTensor& table, const HostTensor& ids, int64_t first_row, HostTensor& out);
// false when a label is outside [0, classes).
bool cross_entropy(const HostTensor& logits, const HostTensor& labels, bool mean, HostTensor& out);
// The vocabulary-parallel loss on a shard x of the classes starting at
// class `offset` (docs/ir.md): s = sum of exp(x - m), p = x[label] - m
// where the label is in the shard (else 0); the total is sum of log s - p.
void cross_entropy_parts(const HostTensor& x, const HostTensor& m, const HostTensor& labels, int64_t offset,
                         HostTensor& s, HostTensor& p);
void cross_entropy_total(const HostTensor& s, const HostTensor& p, HostTensor& out);
// Causal: q's row i sees the keys up to first_query + i (t − s when q is
// the last rows of the sequence; a q shard's start when the sequence is
// split and k, v gathered, as context parallelism does; negative when the
// keys are a later run of positions). With `lse`, each row's log-sum-exp
// too, and a row that sees no key gets 0 and -inf.
void attention(const HostTensor& q, const HostTensor& k, const HostTensor& v, bool causal, int64_t first_query,
               double scale, HostTensor& out, HostTensor* lse = nullptr);
// The positions [first, first + capacity) ∩ [0, context + t) of a KV cache
// [..., capacity, d] whose slot 0 holds position `first` (a whole cache:
// 0; a shard of a split one: its offset): those before `context` from the
// cache, the rest from `step` [..., t, d], which the step writes there.
HostTensor held_positions(const HostTensor& cache, int64_t first, int64_t context, const HostTensor& step);
// Attention states o [n, ..., dv] and lse [n, ...] over n disjoint sets of
// keys merged into the attention over all of them; rows no set saw are 0.
void attention_merge(const HostTensor& o, const HostTensor& lse, HostTensor& out);

// --- layout and shape ---
void slice(const HostTensor& x, int dim, int64_t start, HostTensor& out);
void concat(std::span<const HostTensor* const> in, int dim, HostTensor& out);
void copy_elements(const HostTensor& x, HostTensor& out);  // reshape
void transpose(const HostTensor& x, std::span<const int64_t> perm, HostTensor& out);
void sum(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out);
void reduce_max(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out);
// The entries of x that are not zero, over dims.
void count_nonzero(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out);
// Inverse of sum: x replicated along the new dims `dims` of out.
void expand(const HostTensor& x, std::span<const int64_t> dims, HostTensor& out);
void fill(double value, HostTensor& out);
void cast(const HostTensor& x, HostTensor& out);
// FP8 quantization as the IR's quantize: each group of `block` consecutive
// elements of the last dim (0: the whole tensor, -1: each row) scaled so its largest
// magnitude is the format's largest number, rounded to the format, and
// scaled back: `out` holds the values the FP8 GEMM computes with.
void quantize(const HostTensor& x, int64_t block, HostTensor& out);
// Chunk `index` of `parts` along dim (shard), and its inverse placement.
void shard(const HostTensor& x, int dim, int64_t parts, int64_t index, HostTensor& out);
void unshard(const HostTensor& x, int dim, int64_t index, HostTensor& out);
// S(flat): chunk `index` of x's elements in order, zero past the end; and
// the elements of `out` from consecutive chunks, padding dropped.
void flat_shard(const HostTensor& x, int64_t index, HostTensor& out);
void flat_concat(std::span<const HostTensor* const> chunks, HostTensor& out);

// --- backward compute ---
// Its gradient: v is the forward's input or output, as op.grad_reads says.
void pointwise_grad(const ir::PointwiseOp& op, const HostTensor& dy, const HostTensor& v, HostTensor& out);
void softmax_grad(const HostTensor& dy, const HostTensor& y, int dim, HostTensor& out);
void log_softmax_grad(const HostTensor& dy, const HostTensor& y, int dim, HostTensor& out);
// da, db in a's shape; b broadcast as for binary.
void maximum_grad(const HostTensor& dy, const HostTensor& a, const HostTensor& b, HostTensor& da, HostTensor& db);
void rms_norm_grad(const HostTensor& dy, const HostTensor& x, const HostTensor* gamma, double eps, HostTensor& dx);
void rms_norm_weight_grad(const HostTensor& dy, const HostTensor& x, double eps, HostTensor& dgamma);
void reduce_max_grad(const HostTensor& dy, const HostTensor& x, const HostTensor& y, std::span<const int64_t> dims,
                     HostTensor& dx);
void layernorm_grad(const HostTensor& dy, const HostTensor& x, const HostTensor& gamma, double eps, HostTensor& dx);
void layernorm_weight_grad(const HostTensor& dy, const HostTensor& x, double eps, HostTensor& dgamma,
                           HostTensor& dbeta);
void dropout_grad(const HostTensor& dy, const HostTensor& mask, double p, HostTensor& out);
void embedding_grad(const HostTensor& dy, const HostTensor& ids, int64_t first_row, HostTensor& out);
bool cross_entropy_grad(const HostTensor& dloss, const HostTensor& logits, const HostTensor& labels, bool mean,
                        HostTensor& out);
void cross_entropy_parts_grad(const HostTensor& dloss, const HostTensor& x, const HostTensor& m, const HostTensor& s,
                              const HostTensor& labels, int64_t offset, HostTensor& out);
void attention_grad(const HostTensor& dout, const HostTensor& q, const HostTensor& k, const HostTensor& v, bool causal,
                    int64_t first_query, double scale, HostTensor& dq, HostTensor& dk, HostTensor& dv);

// --- convolution, pooling, batch norm ---
struct Conv2dParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t groups = 1;
};
void conv2d(const HostTensor& x, const HostTensor& w, const Conv2dParams& p, HostTensor& out);
void conv2d_input_grad(const HostTensor& dy, const HostTensor& w, const Conv2dParams& p, HostTensor& dx);
void conv2d_weight_grad(const HostTensor& dy, const HostTensor& x, const Conv2dParams& p, HostTensor& dw);
struct PoolParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
};
void max_pool2d(const HostTensor& x, const PoolParams& p, HostTensor& out);
void avg_pool2d(const HostTensor& x, const PoolParams& p, HostTensor& out);
void max_pool2d_grad(const HostTensor& dy, const HostTensor& x, const PoolParams& p, HostTensor& dx);
void avg_pool2d_grad(const HostTensor& dy, const PoolParams& p, HostTensor& dx);
void batchnorm(const HostTensor& x, const HostTensor& gamma, const HostTensor& beta, double eps, HostTensor& out);
void batchnorm_grad(const HostTensor& dy, const HostTensor& x, const HostTensor& gamma, double eps, HostTensor& dx,
                    HostTensor& dgamma, HostTensor& dbeta);

// Batch norm from (possibly all-reduced) per-channel sums over `count`
// elements per channel.
struct BatchStats {
  const HostTensor& sum;
  const HostTensor& sumsq;
  double count;
  double eps;
};
void batchnorm_stats(const HostTensor& x, HostTensor& sum, HostTensor& sumsq);
void batchnorm_apply(const HostTensor& x, const BatchStats& s, const HostTensor& gamma, const HostTensor& beta,
                     HostTensor& out);
void batchnorm_weight_grad(const HostTensor& dy, const HostTensor& x, const BatchStats& s, HostTensor& dgamma,
                           HostTensor& dbeta);
void batchnorm_input_grad(const HostTensor& dy, const HostTensor& x, const BatchStats& s, const HostTensor& gamma,
                          const HostTensor& dgamma, const HostTensor& dbeta, HostTensor& dx);

// --- routing (kernels_routing.cpp) ---
// The k largest entries of each row along dim kept, the rest zero (ties:
// the lower index first); its gradient passes dy where x was kept. With
// groups (count > 0), only among the `kept` groups of consecutive entries
// whose k / kept largest entries sum highest (node-limited routing).
struct TopKGroups {
  int64_t count = 0;
  int64_t kept = 0;
};
void top_k(const HostTensor& x, int dim, int64_t k, TopKGroups groups, HostTensor& out);
void top_k_grad(const HostTensor& dy, const HostTensor& x, int dim, int64_t k, TopKGroups groups, HostTensor& out);
// Tokens x[G.., s, h] to slots [G.., e, c, h]: each token to every expert
// whose gate (gates[G.., s, e]) is nonzero, in order along s, the first c
// per expert and group; scaled by the gate when weighted.
void dispatch(const HostTensor& x, const HostTensor& gates, bool weighted, HostTensor& out);
// Its inverse: each kept slot of y[G.., e, c, h] added back to its token.
void combine(const HostTensor& y, const HostTensor& gates, bool weighted, HostTensor& out);
// combine's gradient for the gates: dz · y of each kept slot, zero elsewhere.
void combine_gate_grad(const HostTensor& dz, const HostTensor& y, const HostTensor& gates, HostTensor& out);

// --- optimizer and accumulation ---
void sgd(const HostTensor& w, const HostTensor& g, double lr, double weight_decay, HostTensor& out);
struct AdamParams {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;
};
void adam(const HostTensor& w, const HostTensor& g, const HostTensor& m, const HostTensor& v, const AdamParams& p,
          HostTensor& w_out, HostTensor& m_out, HostTensor& v_out);
void accumulate(const HostTensor& acc, const HostTensor& x, HostTensor& out);

}  // namespace dstc::reference::kernels
