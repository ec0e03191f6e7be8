#include "backends/cuda/step_kernels.h"

#include <initializer_list>

#include "backends/reference/dropout_mask.h"
#include "ir/pointwise_semantics.h"

namespace dstc::cuda {
namespace {

constexpr int kThreads = 256;

int blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

int reduce_blocks(int64_t outputs) { return static_cast<int>(outputs < 65535 ? (outputs > 0 ? outputs : 1) : 65535); }

#define DSTC_GRID_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void fill_kernel(float* y, int64_t n, float value) { DSTC_GRID_LOOP(i, n) y[i] = value; }

__global__ void scale_kernel(const float* x, float* y, int64_t n, float factor) {
  DSTC_GRID_LOOP(i, n) y[i] = factor * x[i];
}

__device__ float apply(BinaryOp op, float x, float z) {
  switch (op) {
    case BinaryOp::Add: return x + z;
    case BinaryOp::Sub: return x - z;
    case BinaryOp::Mul: return x * z;
    case BinaryOp::Div: return x / z;
    case BinaryOp::Max: return x < z ? z : x;
  }
  return 0.0f;
}

// 64-bit division is slow on the GPU: none, or 32-bit where it fits.
__device__ int64_t broadcast_index(int64_t i, int64_t n, int64_t nb) {
  return nb == n ? i : n <= INT32_MAX ? static_cast<uint32_t>(i) % static_cast<uint32_t>(nb) : i % nb;
}

__global__ void binary_kernel(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t nb) {
  DSTC_GRID_LOOP(i, n) y[i] = apply(op, a[i], b[broadcast_index(i, n, nb)]);
}

// Streaming kernels move four floats a thread where every pointer is
// 16-byte aligned and the counts are multiples of four (vectorizable):
// a warp then loads 512 bytes an instruction, which HBM serves near its
// rate (bench/results/step_kernel_bandwidth_h100_2026-11-26/).
__global__ void fill4_kernel(float4* y, int64_t n4, float value) {
  DSTC_GRID_LOOP(i, n4) y[i] = float4{value, value, value, value};
}

__global__ void scale4_kernel(const float4* x, float4* y, int64_t n4, float factor) {
  DSTC_GRID_LOOP(i, n4) {
    const float4 v = x[i];
    y[i] = float4{factor * v.x, factor * v.y, factor * v.z, factor * v.w};
  }
}

__global__ void binary4_kernel(BinaryOp op, const float4* a, const float4* b, float4* y, int64_t n4, int64_t nb4) {
  DSTC_GRID_LOOP(i, n4) {
    const float4 x = a[i], z = b[broadcast_index(i, n4, nb4)];
    y[i] = float4{apply(op, x.x, z.x), apply(op, x.y, z.y), apply(op, x.z, z.z), apply(op, x.w, z.w)};
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

__global__ void pointwise_forward4_kernel(int which, const float4* x, float4* y, int64_t n4) {
  DSTC_GRID_LOOP(i, n4) {
    const float4 v = x[i];
    y[i] = float4{activation_forward(which, v.x), activation_forward(which, v.y), activation_forward(which, v.z),
                  activation_forward(which, v.w)};
  }
}

__global__ void pointwise_backward4_kernel(int which, const float4* dy, const float4* v, float4* y, int64_t n4) {
  DSTC_GRID_LOOP(i, n4) {
    const float4 d = dy[i], w = v[i];
    y[i] = float4{activation_backward(which, d.x, w.x), activation_backward(which, d.y, w.y),
                  activation_backward(which, d.z, w.z), activation_backward(which, d.w, w.w)};
  }
}

// What reduce_kernel takes of the reduced elements.
enum class Reduction { Sum, Max, CountNonzero };

// One block per output element: its threads stride over the reduced
// elements, then sum (or take the maximum of) their partial results.
__global__ void reduce_kernel(const float* x, float* y, int64_t out_elements, ReduceShape shape, int64_t reduced_count,
                              Reduction reduction) {
  __shared__ float partial[kThreads];
  const bool max = reduction == Reduction::Max;
  for (int64_t o = blockIdx.x; o < out_elements; o += gridDim.x) {
    int64_t base = 0, rest = o;
    for (int d = shape.kept - 1; d >= 0; --d) {
      base += rest % shape.kept_size[d] * shape.kept_stride[d];
      rest /= shape.kept_size[d];
    }
    float acc = max ? -INFINITY : 0.0f;
    for (int64_t r = threadIdx.x; r < reduced_count; r += blockDim.x) {
      int64_t offset = base, left = r;
      for (int d = shape.reduced - 1; d >= 0; --d) {
        offset += left % shape.reduced_size[d] * shape.reduced_stride[d];
        left /= shape.reduced_size[d];
      }
      const float v = reduction == Reduction::CountNonzero ? (x[offset] != 0.0f ? 1.0f : 0.0f) : x[offset];
      acc = max ? fmaxf(acc, v) : acc + v;
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half)
        partial[threadIdx.x] = max ? fmaxf(partial[threadIdx.x], partial[threadIdx.x + half])
                                   : partial[threadIdx.x] + partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0) y[o] = partial[0];
    __syncthreads();
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

// The sum (or maximum) over the block of each thread's v, returned to every
// thread. Every thread of the block calls it (blockDim.x a multiple of 32).
__device__ float block_reduce(float v, bool max) {
  __shared__ float per_warp[32];
  auto warp_reduce = [max](float x) {
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, x, offset);
      x = max ? fmaxf(x, other) : x + other;
    }
    return x;
  };
  v = warp_reduce(v);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // the previous call's readers are done with per_warp
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  return warp_reduce(lane < blockDim.x / 32 ? per_warp[lane] : (max ? -INFINITY : 0.0f));
}

// Row kernels give each row a team of threads (rows strided over the
// grid), the team's threads striding over the row's elements: coalesced
// reads, team reductions. The team is the block, or where rows are at most
// kWarpRowWidth wide one warp (kWarp; DSTC_LAUNCH_ROWS picks), so a narrow row
// does not leave most of a block waiting at its barriers. A kernel that is
// not a template sees this kWarp; a row kernel's template parameter kWarp
// hides it.
constexpr bool kWarp = false;
constexpr int64_t kWarpRowWidth = 1024;

template <bool kWarpTeam>
__device__ float team_reduce(float v, bool max) {
  if constexpr (kWarpTeam) {
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, v, offset);
      v = max ? fmaxf(v, other) : v + other;
    }
    return v;
  } else {
    return block_reduce(v, max);
  }
}

template <bool kWarpTeam>
__device__ float team_sum(float v) {
  return team_reduce<kWarpTeam>(v, false);
}
template <bool kWarpTeam>
__device__ float team_max(float v) {
  return team_reduce<kWarpTeam>(v, true);
}
__device__ float block_sum(float v) { return block_reduce(v, false); }

#define DSTC_ROW_LOOP(r, rows)                                                                                      \
  for (int64_t r = kWarp ? (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) / 32 : int64_t{blockIdx.x}; r < (rows); \
       r += kWarp ? int64_t{gridDim.x} * blockDim.x / 32 : int64_t{gridDim.x})
#define DSTC_ROW_ELEMENTS(j, n) \
  for (int64_t j = kWarp ? threadIdx.x % 32 : threadIdx.x; j < (n); j += kWarp ? 32 : blockDim.x)
#define DSTC_ROW_LEADER ((kWarp ? threadIdx.x % 32 : threadIdx.x) == 0)

// Launches row kernel K (a template on kWarp) over `rows` rows `width` wide.
#define DSTC_LAUNCH_ROWS(K, rows, width, s, ...)                                              \
  ((width) <= kWarpRowWidth ? K<true><<<warp_row_blocks(rows), kThreads, 0, s>>>(__VA_ARGS__) \
                            : K<false><<<reduce_blocks(rows), kThreads, 0, s>>>(__VA_ARGS__))

int warp_row_blocks(int64_t rows) { return reduce_blocks((rows + kThreads / 32 - 1) / (kThreads / 32)); }

// The mean and 1/sqrt(variance + eps) of a row, the variance about the mean.
template <bool kWarp>
__device__ void row_stats(const float* x, int64_t h, float eps, float& mean, float& inv) {
  float sum = 0.0f;
  DSTC_ROW_ELEMENTS(j, h) sum += x[j];
  mean = team_sum<kWarp>(sum) / static_cast<float>(h);
  float var = 0.0f;
  DSTC_ROW_ELEMENTS(j, h) var += (x[j] - mean) * (x[j] - mean);
  inv = 1.0f / sqrtf(team_sum<kWarp>(var) / static_cast<float>(h) + eps);
}

template <bool kWarp>
__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
                                 int64_t h, float eps) {
  DSTC_ROW_LOOP(r, rows) {
    const float* px = x + r * h;
    float mean, inv;
    row_stats<kWarp>(px, h, eps, mean, inv);
    DSTC_ROW_ELEMENTS(j, h) y[r * h + j] = (px[j] - mean) * inv * gamma[j] + beta[j];
  }
}

template <bool kWarp>
__global__ void layernorm_grad_kernel(const float* dy, const float* x, const float* gamma, float* dx, int64_t rows,
                                      int64_t h, float eps) {
  DSTC_ROW_LOOP(r, rows) {
    const float *px = x + r * h, *pd = dy + r * h;
    float mean, inv;
    row_stats<kWarp>(px, h, eps, mean, inv);
    float sum_g = 0.0f, sum_gx = 0.0f;
    DSTC_ROW_ELEMENTS(j, h) {
      const float g = pd[j] * gamma[j];
      sum_g += g;
      sum_gx += g * (px[j] - mean) * inv;
    }
    const float mean_g = team_sum<kWarp>(sum_g) / static_cast<float>(h);
    const float mean_gx = team_sum<kWarp>(sum_gx) / static_cast<float>(h);
    DSTC_ROW_ELEMENTS(j, h) {
      const float g = pd[j] * gamma[j];
      dx[r * h + j] = inv * (g - mean_g - (px[j] - mean) * inv * mean_gx);
    }
  }
}

template <bool kWarp>
__global__ void row_stats_kernel(const float* x, float* stats, int64_t rows, int64_t h, float eps) {
  DSTC_ROW_LOOP(r, rows) {
    float mean, inv;
    row_stats<kWarp>(x + r * h, h, eps, mean, inv);
    if (DSTC_ROW_LEADER) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = inv;
    }
  }
}

// A column sum over many rows in two passes, both in a fixed order (so the
// result does not vary from run to run): each thread sums one column over a
// chunk of kColumnChunk rows (adjacent threads, adjacent columns), then one
// thread per column adds the chunks' sums in order.
constexpr int64_t kColumnChunk = 64;

// term 0: dgamma's dy·(x − mean)·inv; 1: dbeta's dy; 2: RMS norm's dy·x·inv.
__device__ float weight_grad_term(int term, const float* dy, const float* x, const float* stats, int64_t r, int64_t h,
                                  int64_t j) {
  const int64_t i = r * h + j;
  if (term == 0) return dy[i] * (x[i] - stats[2 * r]) * stats[2 * r + 1];
  if (term == 1) return dy[i];
  return dy[i] * x[i] * stats[r];
}

__global__ void column_chunks_kernel(int term, const float* dy, const float* x, const float* stats, float* partial,
                                     int64_t rows, int64_t h) {
  const int64_t chunks = (rows + kColumnChunk - 1) / kColumnChunk;
  DSTC_GRID_LOOP(i, chunks * h) {
    const int64_t c = i / h, j = i % h, end = (c + 1) * kColumnChunk < rows ? (c + 1) * kColumnChunk : rows;
    float total = 0.0f;
    for (int64_t r = c * kColumnChunk; r < end; ++r) total += weight_grad_term(term, dy, x, stats, r, h, j);
    partial[i] = total;
  }
}

__global__ void column_total_kernel(const float* partial, float* y, int64_t chunks, int64_t h) {
  DSTC_GRID_LOOP(j, h) {
    float total = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) total += partial[c * h + j];
    y[j] = total;
  }
}

__global__ void embedding_kernel(const float* table, const float* ids, float* y, int64_t tokens, int64_t rows,
                                 int64_t h, int64_t first_row) {
  DSTC_GRID_LOOP(i, tokens * h) {
    int64_t row = static_cast<int64_t>(ids[i / h]) - first_row;
    y[i] = row >= 0 && row < rows ? table[row * h + i % h] : 0.0f;
  }
}

__global__ void embedding_grad_kernel(const float* dy, const float* ids, float* y, int64_t tokens, int64_t rows,
                                      int64_t h, int64_t first_row) {
  DSTC_GRID_LOOP(i, tokens * h) {
    int64_t row = static_cast<int64_t>(ids[i / h]) - first_row;
    if (row >= 0 && row < rows) atomicAdd(&y[row * h + i % h], dy[i]);
  }
}

// The row's maximum and sum of exp(x − maximum), in one pass over the row:
// each thread keeps its own maximum and rescales its sum when it grows.
template <bool kWarp>
__device__ void softmax_stats(const float* row, int64_t n, float& mx, float& z) {
  float m = -INFINITY, total = 0.0f;
  DSTC_ROW_ELEMENTS(j, n) {
    const float x = row[j];
    if (x > m) {
      total = (m == -INFINITY ? 0.0f : total * expf(m - x)) + 1.0f;
      m = x;
    } else if (m != -INFINITY) {
      total += expf(x - m);
    }
  }
  mx = team_max<kWarp>(m);
  z = team_sum<kWarp>(m == -INFINITY ? 0.0f : total * expf(m - mx));
}

__global__ void cross_entropy_rows_kernel(const float* logits, const float* labels, float* row_loss, int* bad_label,
                                          int64_t rows, int64_t c) {
  DSTC_ROW_LOOP(r, rows) {
    const float* pl = logits + r * c;
    const int64_t label = static_cast<int64_t>(labels[r]);
    if (label < 0 || label >= c) {
      if (threadIdx.x == 0) {
        *bad_label = 1;
        row_loss[r] = 0.0f;
      }
      continue;
    }
    float mx, z;
    softmax_stats<kWarp>(pl, c, mx, z);
    if (threadIdx.x == 0) row_loss[r] = logf(z) + mx - pl[label];
  }
}

__global__ void cross_entropy_grad_kernel(const float* dloss, const float* logits, const float* labels, float* y,
                                          int* bad_label, int64_t rows, int64_t c, float divisor) {
  DSTC_ROW_LOOP(r, rows) {
    const float* pl = logits + r * c;
    float* po = y + r * c;
    const int64_t label = static_cast<int64_t>(labels[r]);
    if (label < 0 || label >= c) {
      if (threadIdx.x == 0) *bad_label = 1;
      continue;
    }
    const float factor = dloss[0] / divisor;
    float mx, z;
    softmax_stats<kWarp>(pl, c, mx, z);
    DSTC_ROW_ELEMENTS(j, c) po[j] = factor * (expf(pl[j] - mx) / z - (j == label ? 1.0f : 0.0f));
  }
}

__device__ int64_t strided_offset(const StridedShape& shape, int64_t i) {
  int64_t offset = 0;
  for (int d = shape.dims - 1; d >= 0; --d) {
    offset += i % shape.size[d] * shape.stride[d];
    i /= shape.size[d];
  }
  return offset;
}

__global__ void gather_strided_kernel(const float* x, float* y, int64_t n, StridedShape shape) {
  DSTC_GRID_LOOP(i, n) y[i] = x[strided_offset(shape, i)];
}

__global__ void reduce_max_grad_kernel(const float* dy, const float* x, const float* y, float* dx, int64_t n,
                                       StridedShape to_reduced) {
  DSTC_GRID_LOOP(i, n) {
    const int64_t r = strided_offset(to_reduced, i);
    dx[i] = x[i] == y[r] ? dy[r] : 0.0f;
  }
}

__global__ void unary_kernel(UnaryOp op, const float* x, float* y, int64_t n) {
  DSTC_GRID_LOOP(i, n) y[i] = op == UnaryOp::Exp ? expf(x[i]) : sqrtf(x[i]);
}

// Contiguous lines (inner 1) one block per line; strided ones one thread
// per (outer, inner) line, whose neighbours read neighbouring elements.
template <bool kWarp>
__global__ void softmax_rows_kernel(const float* x, float* y, int64_t rows, int64_t n, bool log) {
  DSTC_ROW_LOOP(r, rows) {
    const float* px = x + r * n;
    float mx, total;
    softmax_stats<kWarp>(px, n, mx, total);
    const float log_total = logf(total);
    DSTC_ROW_ELEMENTS(j, n) {
      const float shifted = px[j] - mx;
      y[r * n + j] = log ? shifted - log_total : expf(shifted) / total;
    }
  }
}

template <bool kWarp>
__global__ void softmax_rows_grad_kernel(const float* dy, const float* y, float* dx, int64_t rows, int64_t n,
                                         bool log) {
  DSTC_ROW_LOOP(r, rows) {
    const int64_t base = r * n;
    float partial = 0.0f;
    DSTC_ROW_ELEMENTS(j, n) partial += log ? dy[base + j] : dy[base + j] * y[base + j];
    const float total = team_sum<kWarp>(partial);
    DSTC_ROW_ELEMENTS(j, n) {
      const int64_t at = base + j;
      dx[at] = log ? dy[at] - expf(y[at]) * total : y[at] * (dy[at] - total);
    }
  }
}

__global__ void softmax_kernel(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  DSTC_GRID_LOOP(line, outer * inner) {
    const int64_t base = line / inner * n * inner + line % inner;
    float mx = -INFINITY, total = 0.0f;
    for (int64_t j = 0; j < n; ++j) mx = fmaxf(mx, x[base + j * inner]);
    for (int64_t j = 0; j < n; ++j) total += expf(x[base + j * inner] - mx);
    const float log_total = logf(total);
    for (int64_t j = 0; j < n; ++j) {
      const float shifted = x[base + j * inner] - mx;
      y[base + j * inner] = log ? shifted - log_total : expf(shifted) / total;
    }
  }
}

__global__ void softmax_grad_kernel(const float* dy, const float* y, float* dx, int64_t outer, int64_t n, int64_t inner,
                                    bool log) {
  DSTC_GRID_LOOP(line, outer * inner) {
    const int64_t base = line / inner * n * inner + line % inner;
    float total = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = base + j * inner;
      total += log ? dy[at] : dy[at] * y[at];
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = base + j * inner;
      dx[at] = log ? dy[at] - expf(y[at]) * total : y[at] * (dy[at] - total);
    }
  }
}

template <bool kWarp>
__device__ float rms_inverse(const float* x, int64_t h, float eps) {
  float sq = 0.0f;
  DSTC_ROW_ELEMENTS(j, h) sq += x[j] * x[j];
  return 1.0f / sqrtf(team_sum<kWarp>(sq) / static_cast<float>(h) + eps);
}

template <bool kWarp>
__global__ void rms_norm_kernel(const float* x, const float* gamma, float* y, int64_t rows, int64_t h, float eps) {
  DSTC_ROW_LOOP(r, rows) {
    const float inv = rms_inverse<kWarp>(x + r * h, h, eps);
    DSTC_ROW_ELEMENTS(j, h) y[r * h + j] = x[r * h + j] * inv * (gamma ? gamma[j] : 1.0f);
  }
}

template <bool kWarp>
__global__ void rms_norm_grad_kernel(const float* dy, const float* x, const float* gamma, float* dx, int64_t rows,
                                     int64_t h, float eps) {
  DSTC_ROW_LOOP(r, rows) {
    const float *px = x + r * h, *pd = dy + r * h;
    const float inv = rms_inverse<kWarp>(px, h, eps);
    float partial = 0.0f;
    DSTC_ROW_ELEMENTS(j, h) partial += pd[j] * (gamma ? gamma[j] : 1.0f) * px[j];
    const float gx = team_sum<kWarp>(partial) / static_cast<float>(h);
    DSTC_ROW_ELEMENTS(j, h) dx[r * h + j] = inv * pd[j] * (gamma ? gamma[j] : 1.0f) - px[j] * inv * inv * inv * gx;
  }
}

template <bool kWarp>
__global__ void rms_inverse_kernel(const float* x, float* inverse, int64_t rows, int64_t h, float eps) {
  DSTC_ROW_LOOP(r, rows) {
    const float inv = rms_inverse<kWarp>(x + r * h, h, eps);
    if (DSTC_ROW_LEADER) inverse[r] = inv;
  }
}

__global__ void rope_kernel(const float* x, float* y, int64_t rows, int64_t d, int64_t inner, int64_t positions,
                            int64_t first_position, float base, float sign) {
  const int64_t half = d / 2;
  DSTC_GRID_LOOP(k, rows * half) {
    const int64_t row = k / half, i = k % half;
    const int64_t position = first_position + (row * d / inner) % positions;
    const float angle =
        static_cast<float>(position) * powf(base, -2.0f * static_cast<float>(i) / static_cast<float>(d));
    const float c = cosf(angle), sn = sign * sinf(angle);
    const float* in = x + row * d;
    float* o = y + row * d;
    o[i] = in[i] * c - in[i + half] * sn;
    o[i + half] = in[i + half] * c + in[i] * sn;
  }
}

__global__ void cross_entropy_parts_kernel(const float* x, const float* m, const float* labels, float* sums,
                                           float* picked, int64_t rows, int64_t c, int64_t offset) {
  DSTC_ROW_LOOP(r, rows) {
    const float* row = x + r * c;
    float z = 0.0f;
    DSTC_ROW_ELEMENTS(j, c) z += expf(row[j] - m[r]);
    z = block_sum(z);
    if (threadIdx.x == 0) {
      const int64_t label = static_cast<int64_t>(labels[r]) - offset;
      sums[r] = z;
      picked[r] = label >= 0 && label < c ? row[label] - m[r] : 0.0f;
    }
  }
}

__global__ void cross_entropy_terms_kernel(const float* sums, const float* picked, float* terms, int64_t rows) {
  DSTC_GRID_LOOP(r, rows) terms[r] = logf(sums[r]) - picked[r];
}

__global__ void cross_entropy_parts_grad_kernel(const float* dloss, const float* x, const float* m, const float* sums,
                                                const float* labels, float* y, int64_t rows, int64_t c,
                                                int64_t offset) {
  DSTC_GRID_LOOP(i, rows * c) {
    const int64_t r = i / c, j = i % c;
    const int64_t label = static_cast<int64_t>(labels[r]) - offset;
    y[i] = dloss[0] * (expf(x[i] - m[r]) / sums[r] - (j == label ? 1.0f : 0.0f));
  }
}

__global__ void dropout_kernel(const float* x, float* y, float* mask, int64_t n, DropoutPlace place, double p,
                               uint64_t seed) {
  DSTC_GRID_LOOP(i, n) {
    uint64_t logical = 0;
    int64_t rest = i;
    for (int d = place.dims - 1; d >= 0; --d) {
      logical += static_cast<uint64_t>((rest % place.size[d] + place.offset[d]) * place.logical_stride[d]);
      rest /= place.size[d];
    }
    const bool keep = reference::dropout_keep(seed, logical, p);
    mask[i] = keep ? 1.0f : 0.0f;
    y[i] = keep ? x[i] / (1.0f - p) : 0.0f;
  }
}

// The largest x[base + j·inner] of j in [lo, hi) ranked below (last,
// last_j) (by value, then the lower index), among the groups of `per`
// entries `allowed` marks when per > 0; -1 when none is left.
__device__ int64_t next_largest(const float* x, int64_t base, int64_t inner, int64_t lo, int64_t hi, float last,
                                int64_t last_j, uint64_t allowed, int64_t per) {
  int64_t best = -1;
  for (int64_t j = lo; j < hi; ++j) {
    if (per > 0 && !(allowed >> (j / per) & 1)) continue;
    const float v = x[base + j * inner];
    const bool below_last = v < last || (v == last && j > last_j);
    if (below_last && (best < 0 || v > x[base + best * inner])) best = j;
  }
  return best;
}

// One thread per line: k passes, each taking the largest below the
// previous pick; with groups, first each group's score (the sum of its
// k / kept largest) and the `kept` best groups (ties: the lower group).
__global__ void top_k_kernel(const float* x, const float* dy, float* y, int64_t outer, int64_t n, int64_t inner,
                             int64_t k, int64_t groups, int64_t kept) {
  DSTC_GRID_LOOP(line, outer * inner) {
    const int64_t base = line / inner * n * inner + line % inner;
    for (int64_t j = 0; j < n; ++j) y[base + j * inner] = 0.0f;
    uint64_t allowed = ~uint64_t{0};
    const int64_t per = groups > 0 ? n / groups : 0;
    if (groups > 0) {
      float score[kMaxTopKGroups];
      const int64_t summed = k / kept > 1 ? k / kept : 1;
      for (int64_t g = 0; g < groups; ++g) {
        float last = INFINITY, sum = 0.0f;
        int64_t last_j = -1;
        for (int64_t pick = 0; pick < summed; ++pick) {
          const int64_t j = next_largest(x, base, inner, g * per, (g + 1) * per, last, last_j, allowed, 0);
          if (j < 0) break;
          sum += last = x[base + j * inner];
          last_j = j;
        }
        score[g] = sum;
      }
      allowed = 0;
      for (int64_t pick = 0; pick < kept && pick < groups; ++pick) {
        int64_t best = -1;
        for (int64_t g = 0; g < groups; ++g)
          if (!(allowed >> g & 1) && (best < 0 || score[g] > score[best])) best = g;
        allowed |= uint64_t{1} << best;
      }
    }
    float last = INFINITY;
    int64_t last_j = -1;
    for (int64_t pick = 0; pick < k && pick < n; ++pick) {
      const int64_t best = next_largest(x, base, inner, 0, n, last, last_j, allowed, per);
      if (best < 0) break;
      y[base + best * inner] = dy ? dy[base + best * inner] : x[base + best * inner];
      last = x[base + best * inner];
      last_j = best;
    }
  }
}

// One thread per (group, expert): its tokens in order, until the capacity
// is full. kind 0: dispatch, 1: combine, 2: combine_gate_grad.
__global__ void route_kernel(int kind, const float* in, const float* gates, const float* dz, float* y, Routes r,
                             bool weighted) {
  DSTC_GRID_LOOP(ge, r.groups * r.experts) {
    const int64_t g = ge / r.experts, j = ge % r.experts;
    int64_t slot = 0;
    for (int64_t t = 0; t < r.tokens && slot < r.capacity; ++t) {
      const int64_t token = g * r.tokens + t, at = token * r.experts + j;
      const float gate = gates[at];
      if (gate == 0.0f) continue;
      const int64_t row = (g * r.experts + j) * r.capacity + slot++;
      if (kind == 0) {
        for (int64_t i = 0; i < r.width; ++i)
          y[row * r.width + i] = weighted ? gate * in[token * r.width + i] : in[token * r.width + i];
      } else if (kind == 1) {
        for (int64_t i = 0; i < r.width; ++i)
          atomicAdd(&y[token * r.width + i], weighted ? gate * in[row * r.width + i] : in[row * r.width + i]);
      } else {
        float dot = 0.0f;
        for (int64_t i = 0; i < r.width; ++i) dot += dz[token * r.width + i] * in[row * r.width + i];
        y[at] = dot;
      }
    }
  }
}

__device__ int64_t visible_keys(const AttentionShape& a, int64_t i) {
  if (!a.causal) return a.t;
  int64_t n = a.first_query + i + 1;
  return n < 0 ? 0 : (n > a.t ? a.t : n);
}

__device__ float score(const float* q, const float* k, int64_t d, float scale) {
  float dot = 0.0f;
  for (int64_t l = 0; l < d; ++l) dot += q[l] * k[l];
  return dot * scale;
}

template <bool kWarp>
__global__ void attention_softmax_kernel(float* scores, int64_t rows, AttentionShape a) {
  DSTC_ROW_LOOP(r, rows) {
    float* row = scores + r * a.t;
    const int64_t visible = visible_keys(a, r % a.s);
    float m = -INFINITY;
    DSTC_ROW_ELEMENTS(j, visible) m = fmaxf(m, row[j] * a.scale);
    const float mx = team_max<kWarp>(m);
    float partial = 0.0f;
    DSTC_ROW_ELEMENTS(j, visible) partial += expf(row[j] * a.scale - mx);
    const float z = team_sum<kWarp>(partial);
    DSTC_ROW_ELEMENTS(j, a.t) row[j] = j < visible ? expf(row[j] * a.scale - mx) / z : 0.0f;
  }
}

template <bool kWarp>
__global__ void attention_softmax_grad_kernel(const float* p, float* dp, int64_t rows, AttentionShape a) {
  DSTC_ROW_LOOP(r, rows) {
    const float* pr = p + r * a.t;
    float* dr = dp + r * a.t;
    float partial = 0.0f;
    DSTC_ROW_ELEMENTS(j, a.t) partial += pr[j] * dr[j];
    const float weighted = team_sum<kWarp>(partial);
    DSTC_ROW_ELEMENTS(j, a.t) dr[j] = pr[j] * (dr[j] - weighted) * a.scale;
  }
}

// One thread per query row: the scores twice (max, then the sum of
// exponentials), then the weighted values.
__global__ void attention_kernel(const float* q, const float* k, const float* v, float* y, float* lse,
                                 AttentionShape a) {
  DSTC_GRID_LOOP(row, a.bh * a.s) {
    const int64_t b = row / a.s, i = row % a.s, kv = b / a.group, visible = visible_keys(a, i);
    const float* pq = q + row * a.d;
    const float* pk = k + kv * a.t * a.d;
    const float* pv = v + kv * a.t * a.e;
    float* po = y + row * a.e;
    float mx = -INFINITY, z = 0.0f;
    for (int64_t j = 0; j < visible; ++j) mx = fmaxf(mx, score(pq, pk + j * a.d, a.d, a.scale));
    for (int64_t j = 0; j < visible; ++j) z += expf(score(pq, pk + j * a.d, a.d, a.scale) - mx);
    for (int64_t l = 0; l < a.e; ++l) po[l] = 0.0f;
    for (int64_t j = 0; j < visible; ++j) {
      const float p = expf(score(pq, pk + j * a.d, a.d, a.scale) - mx) / z;
      for (int64_t l = 0; l < a.e; ++l) po[l] += p * pv[j * a.e + l];
    }
    if (lse) lse[row] = visible > 0 ? mx + logf(z) : mx;
  }
}

__global__ void conv2d_kernel(const float* x, const float* w, float* y, ConvShape c) {
  const int64_t cg = c.c_in / c.groups, og = c.o_out / c.groups;
  DSTC_GRID_LOOP(out, c.n * c.o_out * c.oh * c.ow) {
    const int64_t ox = out % c.ow, oy = out / c.ow % c.oh, o = out / (c.ow * c.oh) % c.o_out,
                  n = out / (c.ow * c.oh * c.o_out), first_channel = o / og * cg;
    float sum = 0.0f;
    for (int64_t ch = 0; ch < cg; ++ch)
      for (int64_t i = 0; i < c.kh; ++i) {
        const int64_t iy = oy * c.stride[0] - c.padding[0] + i;
        if (iy < 0 || iy >= c.h) continue;
        for (int64_t j = 0; j < c.kw; ++j) {
          const int64_t ix = ox * c.stride[1] - c.padding[1] + j;
          if (ix < 0 || ix >= c.w) continue;
          sum +=
              x[((n * c.c_in + first_channel + ch) * c.h + iy) * c.w + ix] * w[((o * cg + ch) * c.kh + i) * c.kw + j];
        }
      }
    y[out] = sum;
  }
}

// The outputs along one axis whose window covers input position `at`:
// [*lo, *hi).
__device__ void covering(int64_t at, int64_t stride, int64_t padding, int64_t kernel, int64_t outputs, int64_t* lo,
                         int64_t* hi) {
  const int64_t top = at + padding;  // out·stride <= top < out·stride + kernel
  *lo = top - kernel + 1 > 0 ? (top - kernel + 1 + stride - 1) / stride : 0;
  *hi = top / stride + 1 < outputs ? top / stride + 1 : outputs;
}

__global__ void conv2d_input_grad_kernel(const float* dy, const float* w, float* dx, ConvShape c) {
  const int64_t cg = c.c_in / c.groups, og = c.o_out / c.groups;
  DSTC_GRID_LOOP(at, c.n * c.c_in * c.h * c.w) {
    const int64_t ix = at % c.w, iy = at / c.w % c.h, ci = at / (c.w * c.h) % c.c_in, n = at / (c.w * c.h * c.c_in);
    const int64_t group = ci / cg, ch = ci % cg;
    int64_t y0, y1, x0, x1;
    covering(iy, c.stride[0], c.padding[0], c.kh, c.oh, &y0, &y1);
    covering(ix, c.stride[1], c.padding[1], c.kw, c.ow, &x0, &x1);
    float sum = 0.0f;
    for (int64_t o = group * og; o < (group + 1) * og; ++o)
      for (int64_t oy = y0; oy < y1; ++oy)
        for (int64_t ox = x0; ox < x1; ++ox) {
          const int64_t i = iy + c.padding[0] - oy * c.stride[0], j = ix + c.padding[1] - ox * c.stride[1];
          sum += dy[((n * c.o_out + o) * c.oh + oy) * c.ow + ox] * w[((o * cg + ch) * c.kh + i) * c.kw + j];
        }
    dx[at] = sum;
  }
}

__global__ void conv2d_weight_grad_kernel(const float* dy, const float* x, float* dw, ConvShape c) {
  const int64_t cg = c.c_in / c.groups, og = c.o_out / c.groups;
  DSTC_GRID_LOOP(at, c.o_out * cg * c.kh * c.kw) {
    const int64_t j = at % c.kw, i = at / c.kw % c.kh, ch = at / (c.kw * c.kh) % cg, o = at / (c.kw * c.kh * cg);
    const int64_t channel = o / og * cg + ch;
    float sum = 0.0f;
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t oy = 0; oy < c.oh; ++oy) {
        const int64_t iy = oy * c.stride[0] - c.padding[0] + i;
        if (iy < 0 || iy >= c.h) continue;
        for (int64_t ox = 0; ox < c.ow; ++ox) {
          const int64_t ix = ox * c.stride[1] - c.padding[1] + j;
          if (ix < 0 || ix >= c.w) continue;
          sum += dy[((n * c.o_out + o) * c.oh + oy) * c.ow + ox] * x[((n * c.c_in + channel) * c.h + iy) * c.w + ix];
        }
      }
    dw[at] = sum;
  }
}

// The index in its plane of the first maximum of output window (oy, ox).
__device__ int64_t window_argmax(const float* plane, const PoolShape& p, int64_t oy, int64_t ox) {
  float best = -INFINITY;
  int64_t where = -1;
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    const int64_t iy = oy * p.stride[0] - p.padding[0] + i;
    if (iy < 0 || iy >= p.h) continue;
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      const int64_t ix = ox * p.stride[1] - p.padding[1] + j;
      if (ix >= 0 && ix < p.w && plane[iy * p.w + ix] > best) {
        best = plane[iy * p.w + ix];
        where = iy * p.w + ix;
      }
    }
  }
  return where;
}

enum class PoolKind { Max, Average };

__global__ void pool2d_kernel(PoolKind kind, const float* x, float* y, PoolShape p) {
  DSTC_GRID_LOOP(out, p.planes * p.oh * p.ow) {
    const int64_t ox = out % p.ow, oy = out / p.ow % p.oh;
    const float* plane = x + out / (p.ow * p.oh) * p.h * p.w;
    const bool max = kind == PoolKind::Max;
    float acc = max ? -INFINITY : 0.0f;
    for (int64_t i = 0; i < p.kernel[0]; ++i) {
      const int64_t iy = oy * p.stride[0] - p.padding[0] + i;
      if (iy < 0 || iy >= p.h) continue;
      for (int64_t j = 0; j < p.kernel[1]; ++j) {
        const int64_t ix = ox * p.stride[1] - p.padding[1] + j;
        if (ix < 0 || ix >= p.w) continue;
        acc = max ? fmaxf(acc, plane[iy * p.w + ix]) : acc + plane[iy * p.w + ix];
      }
    }
    y[out] = max ? acc : acc / static_cast<float>(p.kernel[0] * p.kernel[1]);
  }
}

// One thread per input element: the gradients of the windows covering it
// (max: those whose first maximum it is).
__global__ void pool2d_grad_kernel(PoolKind kind, const float* dy, const float* x, float* dx, PoolShape p) {
  DSTC_GRID_LOOP(at, p.planes * p.h * p.w) {
    const int64_t ix = at % p.w, iy = at / p.w % p.h, plane = at / (p.w * p.h);
    int64_t y0, y1, x0, x1;
    covering(iy, p.stride[0], p.padding[0], p.kernel[0], p.oh, &y0, &y1);
    covering(ix, p.stride[1], p.padding[1], p.kernel[1], p.ow, &x0, &x1);
    float sum = 0.0f;
    for (int64_t oy = y0; oy < y1; ++oy)
      for (int64_t ox = x0; ox < x1; ++ox) {
        const float g = dy[(plane * p.oh + oy) * p.ow + ox];
        if (kind == PoolKind::Average)
          sum += g / static_cast<float>(p.kernel[0] * p.kernel[1]);
        else if (window_argmax(x + plane * p.h * p.w, p, oy, ox) == iy * p.w + ix)
          sum += g;
      }
    dx[at] = sum;
  }
}

// Channel c's mean and 1/sqrt(var + eps) from its sums.
__device__ void channel_stats(const float* sum, const float* sumsq, const BatchNormShape& b, int64_t c, float& mean,
                              float& inv) {
  mean = sum[c] / b.count;
  // E[x²] - mean² loses its digits in f32 where |mean| is far above the
  // deviation and may go below 0; a variance is not.
  inv = 1.0f / sqrtf(fmaxf(sumsq[c] / b.count - mean * mean, 0.0f) + b.eps);
}

// One block per channel: block sums over its outer x inner elements of
// f(element index) and g(element index).
template <typename F, typename G>
__device__ void channel_sums(const BatchNormShape& b, F f, G g, float* first, float* second) {
  for (int64_t c = blockIdx.x; c < b.channels; c += gridDim.x) {
    float a = 0.0f, d = 0.0f;
    for (int64_t k = threadIdx.x; k < b.outer * b.inner; k += blockDim.x) {
      const int64_t i = (k / b.inner * b.channels + c) * b.inner + k % b.inner;
      a += f(c, i);
      d += g(c, i);
    }
    a = block_sum(a);
    d = block_sum(d);
    if (threadIdx.x == 0) first[c] = a, second[c] = d;
  }
}

__global__ void batchnorm_stats_kernel(const float* x, float* sum, float* sumsq, BatchNormShape b) {
  channel_sums(
      b, [&](int64_t, int64_t i) { return x[i]; }, [&](int64_t, int64_t i) { return x[i] * x[i]; }, sum, sumsq);
}

__global__ void batchnorm_weight_grad_kernel(const float* dy, const float* x, const float* sum, const float* sumsq,
                                             float* dgamma, float* dbeta, BatchNormShape b) {
  auto xhat_dy = [&](int64_t c, int64_t i) {
    float mean, inv;
    channel_stats(sum, sumsq, b, c, mean, inv);
    return dy[i] * (x[i] - mean) * inv;
  };
  channel_sums(
      b, xhat_dy, [&](int64_t, int64_t i) { return dy[i]; }, dgamma, dbeta);
}

__global__ void batchnorm_apply_kernel(const float* x, const float* sum, const float* sumsq, const float* gamma,
                                       const float* beta, float* y, BatchNormShape b) {
  DSTC_GRID_LOOP(i, b.outer * b.channels * b.inner) {
    const int64_t c = i / b.inner % b.channels;
    float mean, inv;
    channel_stats(sum, sumsq, b, c, mean, inv);
    y[i] = (x[i] - mean) * inv * gamma[c] + beta[c];
  }
}

__global__ void batchnorm_input_grad_kernel(const float* dy, const float* x, const float* sum, const float* sumsq,
                                            const float* gamma, const float* dgamma, const float* dbeta, float* dx,
                                            BatchNormShape b) {
  DSTC_GRID_LOOP(i, b.outer * b.channels * b.inner) {
    const int64_t c = i / b.inner % b.channels;
    float mean, inv;
    channel_stats(sum, sumsq, b, c, mean, inv);
    dx[i] = gamma[c] * inv * (dy[i] - dbeta[c] / b.count - (x[i] - mean) * inv * dgamma[c] / b.count);
  }
}

// One thread per output element: the parts' weights exp(lse - max) over
// their sum, the maximum first so that no exponential overflows.
__global__ void attention_merge_kernel(const float* o, const float* lse, float* y, int64_t parts, int64_t rows,
                                       int64_t dv) {
  DSTC_GRID_LOOP(at, rows * dv) {
    const int64_t r = at / dv, l = at % dv;
    float top = -INFINITY, total = 0.0f, sum = 0.0f;
    for (int64_t i = 0; i < parts; ++i) top = fmaxf(top, lse[i * rows + r]);
    if (top == -INFINITY) {
      y[at] = 0.0f;
      continue;
    }
    for (int64_t i = 0; i < parts; ++i) total += expf(lse[i * rows + r] - top);
    for (int64_t i = 0; i < parts; ++i) sum += expf(lse[i * rows + r] - top) / total * o[(i * rows + r) * dv + l];
    y[at] = sum;
  }
}

// One thread per query row: dq directly, dk and dv added atomically (the
// rows of a k/v head's queries share them).
__global__ void attention_grad_kernel(const float* dout, const float* q, const float* k, const float* v, float* dq,
                                      float* dk, float* dv, AttentionShape a) {
  DSTC_GRID_LOOP(row, a.bh * a.s) {
    const int64_t b = row / a.s, i = row % a.s, kv = b / a.group, visible = visible_keys(a, i);
    const float* pq = q + row * a.d;
    const float* pk = k + kv * a.t * a.d;
    const float* pv = v + kv * a.t * a.e;
    const float* po = dout + row * a.e;
    float* gq = dq + row * a.d;
    float* gk = dk + kv * a.t * a.d;
    float* gv = dv + kv * a.t * a.e;
    float mx = -INFINITY, z = 0.0f, weighted = 0.0f;
    for (int64_t j = 0; j < visible; ++j) mx = fmaxf(mx, score(pq, pk + j * a.d, a.d, a.scale));
    for (int64_t j = 0; j < visible; ++j) z += expf(score(pq, pk + j * a.d, a.d, a.scale) - mx);
    auto dp = [&](int64_t j) {
      float sum = 0.0f;
      for (int64_t l = 0; l < a.e; ++l) sum += po[l] * pv[j * a.e + l];
      return sum;
    };
    for (int64_t j = 0; j < visible; ++j) weighted += expf(score(pq, pk + j * a.d, a.d, a.scale) - mx) / z * dp(j);
    for (int64_t j = 0; j < visible; ++j) {
      const float p = expf(score(pq, pk + j * a.d, a.d, a.scale) - mx) / z;
      const float ds = p * (dp(j) - weighted) * a.scale;
      for (int64_t l = 0; l < a.e; ++l) atomicAdd(&gv[j * a.e + l], p * po[l]);
      for (int64_t l = 0; l < a.d; ++l) {
        gq[l] += ds * pk[j * a.d + l];
        atomicAdd(&gk[j * a.d + l], ds * pq[l]);
      }
    }
  }
}

// One weight gradient term's column sums over rows (weight_grad_term).
cudaError_t column_sum(int term, const float* dy, const float* x, const float* stats, float* y, int64_t rows, int64_t h,
                       cudaStream_t s) {
  const int64_t chunks = (rows + kColumnChunk - 1) / kColumnChunk;
  float* partial = nullptr;
  if (cudaError_t e = cudaMallocAsync(&partial, static_cast<size_t>(chunks * h) * sizeof(float), s); e != cudaSuccess)
    return e;
  column_chunks_kernel<<<blocks(chunks * h), kThreads, 0, s>>>(term, dy, x, stats, partial, rows, h);
  column_total_kernel<<<blocks(h), kThreads, 0, s>>>(partial, y, chunks, h);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t freed = cudaFreeAsync(partial, s);
  return launched != cudaSuccess ? launched : freed;
}

cudaError_t reduce(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, Reduction reduction,
                   cudaStream_t s) {
  int64_t reduced_count = 1;
  for (int d = 0; d < shape.reduced; ++d) reduced_count *= shape.reduced_size[d];
  reduce_kernel<<<reduce_blocks(out_elements), kThreads, 0, s>>>(x, y, out_elements, shape, reduced_count, reduction);
  return cudaGetLastError();
}

}  // namespace

bool vectorizable(int64_t n, std::initializer_list<const void*> pointers) {
  if (n % 4 != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

cudaError_t fill(float* y, int64_t n, float value, cudaStream_t s) {
  if (vectorizable(n, {y}))
    fill4_kernel<<<blocks(n / 4), kThreads, 0, s>>>(reinterpret_cast<float4*>(y), n / 4, value);
  else
    fill_kernel<<<blocks(n), kThreads, 0, s>>>(y, n, value);
  return cudaGetLastError();
}

cudaError_t scale(const float* x, float* y, int64_t n, float factor, cudaStream_t s) {
  if (vectorizable(n, {x, y}))
    scale4_kernel<<<blocks(n / 4), kThreads, 0, s>>>(reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y),
                                                     n / 4, factor);
  else
    scale_kernel<<<blocks(n), kThreads, 0, s>>>(x, y, n, factor);
  return cudaGetLastError();
}

cudaError_t binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, int64_t nb, cudaStream_t s) {
  if (vectorizable(n, {a, b, y}) && nb % 4 == 0)
    binary4_kernel<<<blocks(n / 4), kThreads, 0, s>>>(op, reinterpret_cast<const float4*>(a),
                                                      reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(y),
                                                      n / 4, nb / 4);
  else
    binary_kernel<<<blocks(n), kThreads, 0, s>>>(op, a, b, y, n, nb);
  return cudaGetLastError();
}

cudaError_t pointwise_forward(int activation, const float* x, float* y, int64_t n, cudaStream_t s) {
  if (vectorizable(n, {x, y}))
    pointwise_forward4_kernel<<<blocks(n / 4), kThreads, 0, s>>>(activation, reinterpret_cast<const float4*>(x),
                                                                 reinterpret_cast<float4*>(y), n / 4);
  else
    pointwise_forward_kernel<<<blocks(n), kThreads, 0, s>>>(activation, x, y, n);
  return cudaGetLastError();
}

cudaError_t pointwise_backward(int activation, const float* dy, const float* v, float* y, int64_t n, cudaStream_t s) {
  if (vectorizable(n, {dy, v, y}))
    pointwise_backward4_kernel<<<blocks(n / 4), kThreads, 0, s>>>(activation, reinterpret_cast<const float4*>(dy),
                                                                  reinterpret_cast<const float4*>(v),
                                                                  reinterpret_cast<float4*>(y), n / 4);
  else
    pointwise_backward_kernel<<<blocks(n), kThreads, 0, s>>>(activation, dy, v, y, n);
  return cudaGetLastError();
}

// Whether x is [rows, columns] row-major with the rows summed (a bias's
// gradient), which column_sum reads coalesced.
bool sums_leading_rows(const ReduceShape& shape, int64_t& rows, int64_t& columns) {
  int64_t stride = 1;
  for (int d = shape.kept - 1; d >= 0; --d) {
    if (shape.kept_stride[d] != stride) return false;
    stride *= shape.kept_size[d];
  }
  columns = stride;
  for (int d = shape.reduced - 1; d >= 0; --d) {
    if (shape.reduced_stride[d] != stride) return false;
    stride *= shape.reduced_size[d];
  }
  rows = stride / columns;
  return shape.reduced > 0 && columns > 1;
}

cudaError_t sum(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, cudaStream_t s) {
  if (int64_t rows, columns; sums_leading_rows(shape, rows, columns))
    return column_sum(1, x, nullptr, nullptr, y, rows, columns, s);
  return reduce(x, y, out_elements, shape, Reduction::Sum, s);
}

cudaError_t count_nonzero(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, cudaStream_t s) {
  return reduce(x, y, out_elements, shape, Reduction::CountNonzero, s);
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

cudaError_t copy_rows(const float* x, float* y, int64_t outer, int64_t n, int64_t start, int64_t m, int64_t offset,
                      int64_t count, int64_t inner, cudaStream_t s) {
  // A strided 2-D copy: outer rows of count·inner floats, pitches n·inner
  // and m·inner.
  if (outer == 0 || count * inner == 0) return cudaSuccess;
  const size_t f = sizeof(float);
  return cudaMemcpy2DAsync(y + offset * inner, f * m * inner, x + start * inner, f * n * inner, f * count * inner,
                           outer, cudaMemcpyDeviceToDevice, s);
}

cudaError_t layernorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows, int64_t h,
                      float eps, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(layernorm_kernel, rows, h, s, x, gamma, beta, y, rows, h, eps);
  return cudaGetLastError();
}

cudaError_t layernorm_grad(const float* dy, const float* x, const float* gamma, float* dx, int64_t rows, int64_t h,
                           float eps, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(layernorm_grad_kernel, rows, h, s, dy, x, gamma, dx, rows, h, eps);
  return cudaGetLastError();
}

cudaError_t layernorm_weight_grad(const float* dy, const float* x, float* dgamma, float* dbeta, float* stats,
                                  int64_t rows, int64_t h, float eps, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(row_stats_kernel, rows, h, s, x, stats, rows, h, eps);
  if (cudaError_t e = column_sum(0, dy, x, stats, dgamma, rows, h, s); e != cudaSuccess) return e;
  return column_sum(1, dy, x, stats, dbeta, rows, h, s);
}

cudaError_t embedding(const float* table, const float* ids, float* y, int64_t tokens, int64_t rows, int64_t h,
                      int64_t first_row, cudaStream_t s) {
  embedding_kernel<<<blocks(tokens * h), kThreads, 0, s>>>(table, ids, y, tokens, rows, h, first_row);
  return cudaGetLastError();
}

cudaError_t embedding_grad(const float* dy, const float* ids, float* y, int64_t tokens, int64_t rows, int64_t h,
                           int64_t first_row, cudaStream_t s) {
  fill_kernel<<<blocks(rows * h), kThreads, 0, s>>>(y, rows * h, 0.0f);
  embedding_grad_kernel<<<blocks(tokens * h), kThreads, 0, s>>>(dy, ids, y, tokens, rows, h, first_row);
  return cudaGetLastError();
}

cudaError_t cross_entropy_rows(const float* logits, const float* labels, float* row_loss, int* bad_label, int64_t rows,
                               int64_t c, cudaStream_t s) {
  cross_entropy_rows_kernel<<<reduce_blocks(rows), kThreads, 0, s>>>(logits, labels, row_loss, bad_label, rows, c);
  return cudaGetLastError();
}

cudaError_t cross_entropy_grad(const float* dloss, const float* logits, const float* labels, float* y, int* bad_label,
                               int64_t rows, int64_t c, float divisor, cudaStream_t s) {
  cross_entropy_grad_kernel<<<reduce_blocks(rows), kThreads, 0, s>>>(dloss, logits, labels, y, bad_label, rows, c,
                                                                     divisor);
  return cudaGetLastError();
}

cudaError_t attention(const float* q, const float* k, const float* v, float* y, float* lse, const AttentionShape& a,
                      cudaStream_t s) {
  attention_kernel<<<blocks(a.bh * a.s), kThreads, 0, s>>>(q, k, v, y, lse, a);
  return cudaGetLastError();
}

cudaError_t conv2d(const float* x, const float* w, float* y, const ConvShape& c, cudaStream_t s) {
  conv2d_kernel<<<blocks(c.n * c.o_out * c.oh * c.ow), kThreads, 0, s>>>(x, w, y, c);
  return cudaGetLastError();
}

cudaError_t conv2d_input_grad(const float* dy, const float* w, float* dx, const ConvShape& c, cudaStream_t s) {
  conv2d_input_grad_kernel<<<blocks(c.n * c.c_in * c.h * c.w), kThreads, 0, s>>>(dy, w, dx, c);
  return cudaGetLastError();
}

cudaError_t conv2d_weight_grad(const float* dy, const float* x, float* dw, const ConvShape& c, cudaStream_t s) {
  conv2d_weight_grad_kernel<<<blocks(c.o_out * (c.c_in / c.groups) * c.kh * c.kw), kThreads, 0, s>>>(dy, x, dw, c);
  return cudaGetLastError();
}

cudaError_t max_pool2d(const float* x, float* y, const PoolShape& p, cudaStream_t s) {
  pool2d_kernel<<<blocks(p.planes * p.oh * p.ow), kThreads, 0, s>>>(PoolKind::Max, x, y, p);
  return cudaGetLastError();
}

cudaError_t max_pool2d_grad(const float* dy, const float* x, float* dx, const PoolShape& p, cudaStream_t s) {
  pool2d_grad_kernel<<<blocks(p.planes * p.h * p.w), kThreads, 0, s>>>(PoolKind::Max, dy, x, dx, p);
  return cudaGetLastError();
}

cudaError_t avg_pool2d(const float* x, float* y, const PoolShape& p, cudaStream_t s) {
  pool2d_kernel<<<blocks(p.planes * p.oh * p.ow), kThreads, 0, s>>>(PoolKind::Average, x, y, p);
  return cudaGetLastError();
}

cudaError_t avg_pool2d_grad(const float* dy, float* dx, const PoolShape& p, cudaStream_t s) {
  pool2d_grad_kernel<<<blocks(p.planes * p.h * p.w), kThreads, 0, s>>>(PoolKind::Average, dy, nullptr, dx, p);
  return cudaGetLastError();
}

cudaError_t batchnorm_stats(const float* x, float* sum, float* sumsq, const BatchNormShape& b, cudaStream_t s) {
  batchnorm_stats_kernel<<<reduce_blocks(b.channels), kThreads, 0, s>>>(x, sum, sumsq, b);
  return cudaGetLastError();
}

cudaError_t batchnorm_apply(const float* x, const float* sum, const float* sumsq, const float* gamma, const float* beta,
                            float* y, const BatchNormShape& b, cudaStream_t s) {
  batchnorm_apply_kernel<<<blocks(b.outer * b.channels * b.inner), kThreads, 0, s>>>(x, sum, sumsq, gamma, beta, y, b);
  return cudaGetLastError();
}

cudaError_t batchnorm_weight_grad(const float* dy, const float* x, const float* sum, const float* sumsq, float* dgamma,
                                  float* dbeta, const BatchNormShape& b, cudaStream_t s) {
  batchnorm_weight_grad_kernel<<<reduce_blocks(b.channels), kThreads, 0, s>>>(dy, x, sum, sumsq, dgamma, dbeta, b);
  return cudaGetLastError();
}

cudaError_t batchnorm_input_grad(const float* dy, const float* x, const float* sum, const float* sumsq,
                                 const float* gamma, const float* dgamma, const float* dbeta, float* dx,
                                 const BatchNormShape& b, cudaStream_t s) {
  batchnorm_input_grad_kernel<<<blocks(b.outer * b.channels * b.inner), kThreads, 0, s>>>(dy, x, sum, sumsq, gamma,
                                                                                          dgamma, dbeta, dx, b);
  return cudaGetLastError();
}

cudaError_t attention_merge(const float* o, const float* lse, float* y, int64_t parts, int64_t rows, int64_t dv,
                            cudaStream_t s) {
  attention_merge_kernel<<<blocks(rows * dv), kThreads, 0, s>>>(o, lse, y, parts, rows, dv);
  return cudaGetLastError();
}

cudaError_t attention_grad(const float* dout, const float* q, const float* k, const float* v, float* dq, float* dk,
                           float* dv, const AttentionShape& a, cudaStream_t s) {
  const int64_t bkv = a.bh / a.group;
  fill_kernel<<<blocks(a.bh * a.s * a.d), kThreads, 0, s>>>(dq, a.bh * a.s * a.d, 0.0f);
  fill_kernel<<<blocks(bkv * a.t * a.d), kThreads, 0, s>>>(dk, bkv * a.t * a.d, 0.0f);
  fill_kernel<<<blocks(bkv * a.t * a.e), kThreads, 0, s>>>(dv, bkv * a.t * a.e, 0.0f);
  attention_grad_kernel<<<blocks(a.bh * a.s), kThreads, 0, s>>>(dout, q, k, v, dq, dk, dv, a);
  return cudaGetLastError();
}

cudaError_t reduce_max(const float* x, float* y, int64_t out_elements, const ReduceShape& shape, cudaStream_t s) {
  return reduce(x, y, out_elements, shape, Reduction::Max, s);
}

cudaError_t gather_strided(const float* x, float* y, int64_t n, const StridedShape& shape, cudaStream_t s) {
  gather_strided_kernel<<<blocks(n), kThreads, 0, s>>>(x, y, n, shape);
  return cudaGetLastError();
}

cudaError_t reduce_max_grad(const float* dy, const float* x, const float* y, float* dx, int64_t n,
                            const StridedShape& to_reduced, cudaStream_t s) {
  reduce_max_grad_kernel<<<blocks(n), kThreads, 0, s>>>(dy, x, y, dx, n, to_reduced);
  return cudaGetLastError();
}

cudaError_t unary(UnaryOp op, const float* x, float* y, int64_t n, cudaStream_t s) {
  unary_kernel<<<blocks(n), kThreads, 0, s>>>(op, x, y, n);
  return cudaGetLastError();
}

cudaError_t softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, bool log, cudaStream_t s) {
  if (inner == 1)
    // A block a row at every width: with a warp a row, 1024-wide rows ran
    // at 30 % of HBM bandwidth against the block's 40 %
    // (bench/results/step_kernel_bandwidth_h100_2026-11-26/).
    softmax_rows_kernel<false><<<reduce_blocks(outer), kThreads, 0, s>>>(x, y, outer, n, log);
  else
    softmax_kernel<<<blocks(outer * inner), kThreads, 0, s>>>(x, y, outer, n, inner, log);
  return cudaGetLastError();
}

cudaError_t softmax_grad(const float* dy, const float* y, float* dx, int64_t outer, int64_t n, int64_t inner, bool log,
                         cudaStream_t s) {
  if (inner == 1)
    DSTC_LAUNCH_ROWS(softmax_rows_grad_kernel, outer, n, s, dy, y, dx, outer, n, log);
  else
    softmax_grad_kernel<<<blocks(outer * inner), kThreads, 0, s>>>(dy, y, dx, outer, n, inner, log);
  return cudaGetLastError();
}

cudaError_t rms_norm(const float* x, const float* gamma, float* y, int64_t rows, int64_t h, float eps, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(rms_norm_kernel, rows, h, s, x, gamma, y, rows, h, eps);
  return cudaGetLastError();
}

cudaError_t rms_norm_grad(const float* dy, const float* x, const float* gamma, float* dx, int64_t rows, int64_t h,
                          float eps, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(rms_norm_grad_kernel, rows, h, s, dy, x, gamma, dx, rows, h, eps);
  return cudaGetLastError();
}

cudaError_t rms_norm_weight_grad(const float* dy, const float* x, float* dgamma, float* inverse, int64_t rows,
                                 int64_t h, float eps, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(rms_inverse_kernel, rows, h, s, x, inverse, rows, h, eps);
  return column_sum(2, dy, x, inverse, dgamma, rows, h, s);
}

cudaError_t rope(const float* x, float* y, int64_t rows, int64_t d, int64_t inner, int64_t positions,
                 int64_t first_position, float base, float sign, cudaStream_t s) {
  rope_kernel<<<blocks(rows * (d / 2)), kThreads, 0, s>>>(x, y, rows, d, inner, positions, first_position, base, sign);
  return cudaGetLastError();
}

cudaError_t cross_entropy_parts(const float* x, const float* m, const float* labels, float* sums, float* picked,
                                int64_t rows, int64_t c, int64_t offset, cudaStream_t s) {
  cross_entropy_parts_kernel<<<reduce_blocks(rows), kThreads, 0, s>>>(x, m, labels, sums, picked, rows, c, offset);
  return cudaGetLastError();
}

cudaError_t cross_entropy_total(const float* sums, const float* picked, float* y, float* scratch, int64_t rows,
                                cudaStream_t s) {
  cross_entropy_terms_kernel<<<blocks(rows), kThreads, 0, s>>>(sums, picked, scratch, rows);
  ReduceShape all{};
  all.reduced = 1;
  all.reduced_size[0] = rows;
  all.reduced_stride[0] = 1;
  return sum(scratch, y, 1, all, s);
}

cudaError_t cross_entropy_parts_grad(const float* dloss, const float* x, const float* m, const float* sums,
                                     const float* labels, float* y, int64_t rows, int64_t c, int64_t offset,
                                     cudaStream_t s) {
  cross_entropy_parts_grad_kernel<<<blocks(rows * c), kThreads, 0, s>>>(dloss, x, m, sums, labels, y, rows, c, offset);
  return cudaGetLastError();
}

cudaError_t dropout(const float* x, float* y, float* mask, int64_t n, const DropoutPlace& place, double p,
                    uint64_t seed, cudaStream_t s) {
  dropout_kernel<<<blocks(n), kThreads, 0, s>>>(x, y, mask, n, place, p, seed);
  return cudaGetLastError();
}

cudaError_t top_k(const float* x, const float* dy, float* y, int64_t outer, int64_t n, int64_t inner, int64_t k,
                  int64_t groups, int64_t kept, cudaStream_t s) {
  if (groups > kMaxTopKGroups || (groups > 0 && (kept <= 0 || n % groups != 0))) return cudaErrorInvalidValue;
  top_k_kernel<<<blocks(outer * inner), kThreads, 0, s>>>(x, dy, y, outer, n, inner, k, groups, kept);
  return cudaGetLastError();
}

cudaError_t dispatch(const float* x, const float* gates, float* y, const Routes& r, bool weighted, cudaStream_t s) {
  fill_kernel<<<blocks(r.groups * r.experts * r.capacity * r.width), kThreads, 0, s>>>(
      y, r.groups * r.experts * r.capacity * r.width, 0.0f);
  route_kernel<<<blocks(r.groups * r.experts), kThreads, 0, s>>>(0, x, gates, nullptr, y, r, weighted);
  return cudaGetLastError();
}

cudaError_t combine(const float* slots, const float* gates, float* y, const Routes& r, bool weighted, cudaStream_t s) {
  fill_kernel<<<blocks(r.groups * r.tokens * r.width), kThreads, 0, s>>>(y, r.groups * r.tokens * r.width, 0.0f);
  route_kernel<<<blocks(r.groups * r.experts), kThreads, 0, s>>>(1, slots, gates, nullptr, y, r, weighted);
  return cudaGetLastError();
}

cudaError_t combine_gate_grad(const float* dz, const float* slots, const float* gates, float* y, const Routes& r,
                              cudaStream_t s) {
  fill_kernel<<<blocks(r.groups * r.tokens * r.experts), kThreads, 0, s>>>(y, r.groups * r.tokens * r.experts, 0.0f);
  route_kernel<<<blocks(r.groups * r.experts), kThreads, 0, s>>>(2, slots, gates, dz, y, r, false);
  return cudaGetLastError();
}

cudaError_t attention_softmax(float* scores, int64_t rows, const AttentionShape& a, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(attention_softmax_kernel, rows, a.t, s, scores, rows, a);
  return cudaGetLastError();
}

cudaError_t attention_softmax_grad(const float* p, float* dp, int64_t rows, const AttentionShape& a, cudaStream_t s) {
  DSTC_LAUNCH_ROWS(attention_softmax_grad_kernel, rows, a.t, s, p, dp, rows, a);
  return cudaGetLastError();
}

}  // namespace dstc::cuda
