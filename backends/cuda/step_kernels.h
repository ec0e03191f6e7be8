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

}  // namespace dstc::cuda
