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

// Attention over q [bh, s, d], k [bkv, t, d], v [bkv, t, e] with `group`
// query heads per k/v head; query i sees keys up to first_query + i when
// causal.
struct AttentionShape {
  int64_t bh, s, d, t, e, group, first_query;
  bool causal;
  float scale;
};
cudaError_t attention(const float* q, const float* k, const float* v, float* y, const AttentionShape& a,
                      cudaStream_t s);
// dq, dk, dv zeroed first.
cudaError_t attention_grad(const float* dout, const float* q, const float* k, const float* v, float* dq, float* dk,
                           float* dv, const AttentionShape& a, cudaStream_t s);

}  // namespace dstc::cuda
