#include "backends/cuda/step_kernels.h"

#include "ir/pointwise_semantics.h"

namespace dstc::cuda {
namespace {

constexpr int kThreads = 256;

int blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

#define DSTC_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void fill_kernel(float* y, int64_t n, float value) { DSTC_GRID_LOOP(i, n) y[i] = value; }

__global__ void scale_kernel(const float* x, float* y, int64_t n, float factor) {
  DSTC_GRID_LOOP(i, n) y[i] = factor * x[i];
}

__global__ void binary_kernel(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t nb) {
  DSTC_GRID_LOOP(i, n) {
    float x = a[i], z = b[i % nb];
    switch (op) {
      case BinaryOp::Add: y[i] = x + z; break;
      case BinaryOp::Sub: y[i] = x - z; break;
      case BinaryOp::Mul: y[i] = x * z; break;
      case BinaryOp::Div: y[i] = x / z; break;
      case BinaryOp::Max: y[i] = x < z ? z : x; break;
    }
  }
}

// The activations' rows, numbered as in ir/pointwise_ops.def.
enum Activation {
#define DSTC_POINTWISE(kind, name, grad, grad_name, flops, grad_flops, reads, semantics, summary) k##kind,
#include "ir/pointwise_ops.def"
#undef DSTC_POINTWISE
};

__device__ float activation_forward(int which, float x) {
  switch (which) {
#define DSTC_POINTWISE(kind, name, grad, grad_name, flops, grad_flops, reads, semantics, summary) \
  case k##kind:                                                                                   \
    return ir::pointwise::semantics##_forward<float>(x);
#include "ir/pointwise_ops.def"
#undef DSTC_POINTWISE
  }
  return 0.0f;
}

__device__ float activation_backward(int which, float dy, float v) {
  switch (which) {
#define DSTC_POINTWISE(kind, name, grad, grad_name, flops, grad_flops, reads, semantics, summary) \
  case k##kind:                                                                                   \
    return ir::pointwise::semantics##_backward<float>(dy, v);
#include "ir/pointwise_ops.def"
#undef DSTC_POINTWISE
  }
  return 0.0f;
}

__global__ void pointwise_forward_kernel(int which, const float* x, float* y, int64_t n) {
  DSTC_GRID_LOOP(i, n) y[i] = activation_forward(which, x[i]);
}

__global__ void pointwise_backward_kernel(int which, const float* dy, const float* v, float* y, int64_t n) {
  DSTC_GRID_LOOP(i, n) y[i] = activation_backward(which, dy[i], v[i]);
}

// One thread per output element; the reduced elements in x's order.
__global__ void sum_kernel(const float* x, float* y, int64_t out_elements, ReduceShape shape, int64_t reduced_count) {
  DSTC_GRID_LOOP(o, out_elements) {
    int64_t base = 0, rest = o;
    for (int d = shape.kept - 1; d >= 0; --d) {
      base += rest % shape.kept_size[d] * shape.kept_stride[d];
      rest /= shape.kept_size[d];
    }
    float total = 0.0f;
    for (int64_t r = 0; r < reduced_count; ++r) {
      int64_t offset = base, left = r;
      for (int d = shape.reduced - 1; d >= 0; --d) {
        offset += left % shape.reduced_size[d] * shape.reduced_stride[d];
        left /= shape.reduced_size[d];
      }
      total += x[offset];
    }
    y[o] = total;
  }
}

// One thread per output element; the summed letters innermost, in order.
__global__ void einsum_kernel(const float* a, const float* b, float* y, int64_t out_elements, EinsumShape shape,
                              int64_t summed_count) {
  DSTC_GRID_LOOP(o, out_elements) {
    int64_t at[2] = {0, 0}, rest = o;
    for (int l = shape.out_letters - 1; l >= 0; --l) {
      int64_t i = rest % shape.size[l];
      rest /= shape.size[l];
      at[0] += i * shape.stride[0][l];
      at[1] += i * shape.stride[1][l];
    }
    float total = 0.0f;
    for (int64_t r = 0; r < summed_count; ++r) {
      int64_t off[2] = {at[0], at[1]}, left = r;
      for (int l = shape.letters - 1; l >= shape.out_letters; --l) {
        int64_t i = left % shape.size[l];
        left /= shape.size[l];
        off[0] += i * shape.stride[0][l];
        off[1] += i * shape.stride[1][l];
      }
      total += shape.operands == 2 ? a[off[0]] * b[off[1]] : a[off[0]];
    }
    y[o] = total;
  }
}

__global__ void sgd_kernel(const float* w, const float* g, float* y, int64_t n, float lr, float weight_decay) {
  DSTC_GRID_LOOP(i, n) y[i] = w[i] - lr * (g[i] + weight_decay * w[i]);
}

__global__ void adam_kernel(const float* w, const float* g, const float* m, const float* v, float* w_out, float* m_out,
                            float* v_out, int64_t n, AdamStep p) {
  DSTC_GRID_LOOP(i, n) {
    float mi = p.beta1 * m[i] + (1 - p.beta1) * g[i];
    float vi = p.beta2 * v[i] + (1 - p.beta2) * g[i] * g[i];
    m_out[i] = mi;
    v_out[i] = vi;
    w_out[i] = w[i] - p.lr * (mi / p.bias1 / (sqrtf(vi / p.bias2) + p.eps) + p.weight_decay * w[i]);
  }
}

}  // namespace

cudaError_t fill(float* y, int64_t n, float value, cudaStream_t s) {
  fill_kernel<<<blocks(n), kThreads, 0, s>>>(y, n, value);
  return cudaGetLastError();
}

cudaError_t scale(const float* x, float* y, int64_t n, float factor, cudaStream_t s) {
  scale_kernel<<<blocks(n), kThreads, 0, s>>>(x, y, n, factor);
  return cudaGetLastError();
}

cudaError_t binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t nb, cudaStream_t s) {
  binary_kernel<<<blocks(n), kThreads, 0, s>>>(op, a, b, y, n, nb);
  return cudaGetLastError();
}

cudaError_t pointwise_forward(int activation, const float* x, float* y, int64_t n, cudaStream_t s) {
  pointwise_forward_kernel<<<blocks(n), kThreads, 0, s>>>(activation, x, y, n);
  return cudaGetLastError();
}

cudaError_t pointwise_backward(int activation, const float* dy, const float* v, float* y, int64_t n, cudaStream_t s) {
  pointwise_backward_kernel<<<blocks(n), kThreads, 0, s>>>(activation, dy, v, y, n);
  return cudaGetLastError();
}

cudaError_t sum(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, cudaStream_t s) {
  int64_t reduced_count = 1;
  for (int d = 0; d < shape.reduced; ++d) reduced_count *= shape.reduced_size[d];
  sum_kernel<<<blocks(out_elements), kThreads, 0, s>>>(x, y, out_elements, shape, reduced_count);
  return cudaGetLastError();
}

cudaError_t einsum(const float* a, const float* b, float* y, int64_t out_elements, const EinsumShape& shape,
                   cudaStream_t s) {
  int64_t summed_count = 1;
  for (int l = shape.out_letters; l < shape.letters; ++l) summed_count *= shape.size[l];
  einsum_kernel<<<blocks(out_elements), kThreads, 0, s>>>(a, b, y, out_elements, shape, summed_count);
  return cudaGetLastError();
}

cudaError_t sgd(const float* w, const float* g, float* y, int64_t n, float lr, float weight_decay, cudaStream_t s) {
  sgd_kernel<<<blocks(n), kThreads, 0, s>>>(w, g, y, n, lr, weight_decay);
  return cudaGetLastError();
}

cudaError_t adam(const float* w, const float* g, const float* m, const float* v, float* w_out, float* m_out,
                 float* v_out, int64_t n, const AdamStep& p, cudaStream_t s) {
  adam_kernel<<<blocks(n), kThreads, 0, s>>>(w, g, m, v, w_out, m_out, v_out, n, p);
  return cudaGetLastError();
}

}  // namespace dstc::cuda
