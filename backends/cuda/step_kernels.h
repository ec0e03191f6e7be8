// The CUDA device's kernels for a training step's ops (cuda_device.h), on
// f32 values. Plain pointers and sizes: this header is read by nvcc
// (C++17) and by the C++20 device code alike. Each returns the launch's
// status.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace dstc::cuda {

// Up to this many dims per tensor (ir::kMaxRank) and letters per einsum.
inline constexpr int kMaxDims = 8;
inline constexpr int kMaxLetters = 16;

enum class BinaryOp : int { Add, Sub, Mul, Div, Max };

cudaError_t fill(float* y, int64_t n, float value, cudaStream_t s);
cudaError_t scale(const float* x, float* y, int64_t n, float factor, cudaStream_t s);
// b has nb elements, a's trailing ones, broadcast over the leading dims.
cudaError_t binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t nb, cudaStream_t s);
// `activation`: the row of ir/pointwise_ops.def, from 0.
cudaError_t pointwise_forward(int activation, const float* x, float* y, int64_t n, cudaStream_t s);
cudaError_t pointwise_backward(int activation, const float* dy, const float* v, float* y, int64_t n, cudaStream_t s);

// y[o] = sum over the reduced dims of x: x's dims are split into kept
// ones (y's elements, row-major) and reduced ones, each with x's stride.
struct ReduceShape {
  int kept = 0, reduced = 0;
  int64_t kept_size[kMaxDims], kept_stride[kMaxDims];
  int64_t reduced_size[kMaxDims], reduced_stride[kMaxDims];
};
cudaError_t sum(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, cudaStream_t s);
cudaError_t reduce_max(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, cudaStream_t s);
// y[o] = the reduced elements of x that are not zero.
cudaError_t count_nonzero(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, cudaStream_t s);

// y[i] = x[offset(i)]: i walks y's dims (row-major), each dim with its
// stride in x (0 for a dim x lacks): transposes and broadcasts.
struct StridedShape {
  int dims = 0;
  int64_t size[kMaxDims], stride[kMaxDims];
};
cudaError_t gather_strided(const float* x, float* y, int64_t n, const StridedShape& shape, cudaStream_t s);
// dx[i] = dy[r] where x[i] equals the maximum y[r], else 0 (r: `to_reduced`
// maps x's index to the reduced tensor's).
cudaError_t reduce_max_grad(const float* dy, const float* x, const float* y, float* dx, int64_t n,
                            const StridedShape& to_reduced, cudaStream_t s);

enum class UnaryOp : int { Exp, Sqrt };
cudaError_t unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t s);

// Softmax and log-softmax along the middle dim of [outer, n, inner], and
// their gradients from dy and the forward's output y.
cudaError_t softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log, cudaStream_t s);
cudaError_t softmax_grad(const float* dy, const float* y, float* dx, int64_t outer, int64_t n, int64_t inner, bool log,
                         cudaStream_t s);

// An einsum of one or two operands: letters 0..out_letters-1 index y
// (row-major), the rest are summed; stride[k][l] is letter l's stride in
// operand k (0 where it does not appear).
struct EinsumShape {
  int operands = 2, letters = 0, out_letters = 0;
  int64_t size[kMaxLetters];
  int64_t stride[2][kMaxLetters];
};
cudaError_t einsum(const float* a, const float* b, float* y, int64_t out_elements, const EinsumShape& shape,
                   cudaStream_t s);

cudaError_t sgd(const float* w, const float* g, float* y, int64_t n, float lr, float weight_decay, cudaStream_t s);
struct AdamStep {
  float lr, beta1, beta2, eps, weight_decay;
  float bias1, bias2;  // 1 - beta^step
};
cudaError_t adam(const float* w, const float* g, const float* m, const float* v, float* w_out, float* m_out,
                 float* v_out, int64_t n, const AdamStep& p, cudaStream_t s);

// Copies of blocks along one dim: x is [outer, n, inner] read from
// `start`, y is [outer, m, inner] written from `offset`; `count` rows of
// the dim are copied.
cudaError_t copy_rows(const float* x, float* y, int64_t outer, int64_t n, int64_t start, int64_t m, int64_t offset,
                      int64_t count, int64_t inner, cudaStream_t s);

// Layer norm over the last dim (h) of `rows` rows.
cudaError_t layernorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t h,
                      float eps, cudaStream_t s);
cudaError_t layernorm_grad(const float* dy, const float* x, const float* gamma, float* dx, int64_t rows, int64_t h,
                           float eps, cudaStream_t s);
// `stats` holds 2·rows floats of scratch (each row's mean and 1/std).
cudaError_t layernorm_weight_grad(const float* dy, const float* x, float* dgamma, float* dbeta, float* stats,
                                  int64_t rows, int64_t h, float eps, cudaStream_t s);

// RMS norm over the last dim; gamma may be null (no weight).
cudaError_t rms_norm(const float* x, const float* gamma, float* y, int64_t rows, int64_t h, float eps, cudaStream_t s);
cudaError_t rms_norm_grad(const float* dy, const float* x, const float* gamma, float* dx, int64_t rows, int64_t h,
                          float eps, cudaStream_t s);
// `inverse` holds rows floats of scratch.
cudaError_t rms_norm_weight_grad(const float* dy, const float* x, float* dgamma, float* inverse, int64_t rows,
                                 int64_t h, float eps, cudaStream_t s);

// Rotary embedding of rows of d elements: row r is at position
// first_position + (r·d / inner) mod positions; `sign` -1 undoes it.
cudaError_t rope(const float* x, float* y, int64_t rows, int64_t d, int64_t inner, int64_t positions,
                 int64_t first_position, float base, float sign, cudaStream_t s);

// Rows of the table [rows, h] for each id (id - first_row), zeros for ids
// of other shards.
cudaError_t embedding(const float* table, const float* ids, float* y, int64_t tokens, int64_t rows, int64_t h,
                      int64_t first_row, cudaStream_t s);
// y (zeroed first) gets dy's row of each token added to its id's row.
cudaError_t embedding_grad(const float* dy, const float* ids, float* y, int64_t tokens, int64_t rows, int64_t h,
                           int64_t first_row, cudaStream_t s);

// Per-row losses into `row_loss` (rows floats); `bad_label` (one int, set
// to 0 first) becomes 1 where a label is outside [0, c).
cudaError_t cross_entropy_rows(const float* logits, const float* labels, float* row_loss, int* bad_label, int64_t rows,
                               int64_t c, cudaStream_t s);
cudaError_t cross_entropy_grad(const float* dloss, const float* logits, const float* labels, float* y, int* bad_label,
                               int64_t rows, int64_t c, float divisor, cudaStream_t s);

// The vocabulary-parallel loss on a shard of the classes starting at
// `offset`: per row the sum of exp(x - m) and x[label] - m (0 where the
// label is elsewhere); the total is the sum over rows of log s - p; the
// gradient dloss·(exp(x - m)/s - [j is the label]).
cudaError_t cross_entropy_parts(const float* x, const float* m, const float* labels, float* sums, float* picked,
                                int64_t rows, int64_t c, int64_t offset, cudaStream_t s);
cudaError_t cross_entropy_total(const float* sums, const float* picked, float* y, float* scratch, int64_t rows,
                                cudaStream_t s);
cudaError_t cross_entropy_parts_grad(const float* dloss, const float* x, const float* m, const float* sums,
                                     const float* labels, float* y, int64_t rows, int64_t c, int64_t offset,
                                     cudaStream_t s);

// Dropout of x (the local block at `offset` of a tensor of `logical`
// shape, `dims` dims): y = x/(1-p) where reference::dropout_keep keeps the
// logical element, else 0; mask 1 or 0.
struct DropoutPlace {
  int dims = 0;
  int64_t size[kMaxDims], offset[kMaxDims], logical_stride[kMaxDims];
};
cudaError_t dropout(const float* x, float* y, float* mask, int64_t n, const DropoutPlace& place, double p,
                    uint64_t seed, cudaStream_t s);

// Along the middle dim (n) of [outer, n, inner]: y keeps the k largest of
// each line (ties: the lower index) and zeros the rest; the gradient keeps
// dy at the same places. With `groups` > 0 (at most kMaxTopKGroups), only
// among the `kept` groups of n / groups consecutive entries whose k / kept
// largest sum highest (node-limited routing, as the reference's top_k).
inline constexpr int64_t kMaxTopKGroups = 64;
cudaError_t top_k(const float* x, const float* dy, float* y, int64_t outer, int64_t n, int64_t inner, int64_t k,
                  int64_t groups, int64_t kept, cudaStream_t s);

// Routing of gates [groups, tokens, experts] into capacity slots
// [groups·experts·capacity, width], tokens in order per expert (as the
// reference's for_each_route): dispatch copies token rows into slots
// (times the gate when weighted), combine adds slot rows back into token
// rows, combine_gate_grad puts dz·y of each route at its gate.
struct Routes {
  int64_t groups, tokens, experts, capacity, width;
};
cudaError_t dispatch(const float* x, const float* gates, float* y, const Routes& r, bool weighted, cudaStream_t s);
cudaError_t combine(const float* slots, const float* gates, float* y, const Routes& r, bool weighted, cudaStream_t s);
cudaError_t combine_gate_grad(const float* dz, const float* slots, const float* gates, float* y, const Routes& r,
                              cudaStream_t s);

// Convolution of x [n, c_in, h, w] by w [o_out, c_in / groups, kh, kw]
// into y [n, o_out, oh, ow] (NCHW, zero padding), and its gradients; one
// thread per element written, each a sum in a fixed order (no atomics).
struct ConvShape {
  int64_t n, c_in, h, w, o_out, kh, kw, oh, ow, groups;
  int64_t stride[2], padding[2];
};
cudaError_t conv2d(const float* x, const float* w, float* y, const ConvShape& c, cudaStream_t s);
cudaError_t conv2d_input_grad(const float* dy, const float* w, float* dx, const ConvShape& c, cudaStream_t s);
cudaError_t conv2d_weight_grad(const float* dy, const float* x, float* dw, const ConvShape& c, cudaStream_t s);
// Pooling of planes [planes, h, w] into [planes, oh, ow] over windows of
// `kernel` (positions outside x skipped; the average divides by the whole
// window); max pooling's gradient goes to each window's first maximum.
struct PoolShape {
  int64_t planes, h, w, oh, ow;
  int64_t kernel[2], stride[2], padding[2];
};
cudaError_t max_pool2d(const float* x, float* y, const PoolShape& p, cudaStream_t s);
cudaError_t max_pool2d_grad(const float* dy, const float* x, float* dx, const PoolShape& p, cudaStream_t s);
cudaError_t avg_pool2d(const float* x, float* y, const PoolShape& p, cudaStream_t s);
cudaError_t avg_pool2d_grad(const float* dy, float* dx, const PoolShape& p, cudaStream_t s);

// Batch norm over x [outer, channels, inner] from per-channel sums over
// `count` elements (those of every device holding a part of the batch):
// the sums of x and x², the normalization by mean and 1/sqrt(var + eps)
// times gamma plus beta, the gradients of gamma and beta (per-channel sums
// of dy·x̂ and dy) and of x. One block per channel for the sums.
struct BatchNormShape {
  int64_t outer, channels, inner;
  float count, eps;
};
cudaError_t batchnorm_stats(const float* x, float* sum, float* sumsq, const BatchNormShape& b, cudaStream_t s);
cudaError_t batchnorm_apply(const float* x, const float* sum, const float* sumsq, const float* gamma, const float* beta,
                            float* y, const BatchNormShape& b, cudaStream_t s);
cudaError_t batchnorm_weight_grad(const float* dy, const float* x, const float* sum, const float* sumsq, float* dgamma,
                                  float* dbeta, const BatchNormShape& b, cudaStream_t s);
cudaError_t batchnorm_input_grad(const float* dy, const float* x, const float* sum, const float* sumsq,
                                 const float* gamma, const float* dgamma, const float* dbeta, float* dx,
                                 const BatchNormShape& b, cudaStream_t s);

// Attention over q [bh, s, d], k [bkv, t, d], v [bkv, t, e] with `group`
// query heads per k/v head; query i sees keys up to first_query + i when
// causal.
struct AttentionShape {
  int64_t bh, s, d, t, e, group, first_query;
  bool causal;
  float scale;
};
// `lse` (bh·s floats, or null) gets each row's log-sum-exp of its scaled
// scores, -inf for a row that sees no key (flash-decoding's partials).
cudaError_t attention(const float* q, const float* k, const float* v, float* y, float* lse, const AttentionShape& a,
                      cudaStream_t s);
// Flash-decoding's merge of `parts` partial outputs o [parts, rows, dv]
// by their log-sum-exps lse [parts, rows] into y [rows, dv].
cudaError_t attention_merge(const float* o, const float* lse, float* y, int64_t parts, int64_t rows, int64_t dv,
                            cudaStream_t s);
// Attention's softmax on its scores S [rows, t] in place: row r is query
// r mod s (rows run over the query heads of a k/v head, then the queries),
// scaled by `scale`, masked beyond its visible keys when causal. The
// gradient turns dP into dS = P (dP - rowsum(P dP)) scale in place.
cudaError_t attention_softmax(float* scores, int64_t rows, const AttentionShape& a, cudaStream_t s);
cudaError_t attention_softmax_grad(const float* p, float* dp, int64_t rows, const AttentionShape& a, cudaStream_t s);
// dq, dk, dv zeroed first.
cudaError_t attention_grad(const float* dout, const float* q, const float* k, const float* v, float* dq, float* dk,
                           float* dv, const AttentionShape& a, cudaStream_t s);

}  // namespace dstc::cuda
