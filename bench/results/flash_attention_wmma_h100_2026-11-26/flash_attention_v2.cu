#include "flash_attention.h"

#include <mma.h>

#include <cstdint>
#include <type_traits>

#include "attention_mask.cuh"

namespace dstc::cuda {
namespace {

using namespace nvcuda;

// Query and key tiles of kRows rows: a head dim of 128 takes 32-row tiles,
// so the gradient kernels' six tiles fit in shared memory twice per SM.
template <int D>
constexpr int kRows = D == 64 ? 64 : 32;
template <int D>
constexpr int kWarps = kRows<D> == 64 ? 8 : 4;
// Shared rows padded by 4 floats: wmma wants 32-byte aligned tiles and a
// row length a multiple of 4, and the padding puts a fragment's rows in
// different banks.
template <int D>
constexpr int kLd = D + 4;
template <int D>
constexpr int kLs = kRows<D> + 4;

using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

// A warp's share of the 16x16 tiles of an [M, N] product.
template <int M, int N, int W>
constexpr int kTilesPerWarp = (M / 16) * (N / 16) / W;

// The warp's i-th tile of an [M, N] product is tile number warp + W·i,
// row-major over the tiles.
template <int N, int W>
__device__ int tile_row(int i) {
  return (static_cast<int>(threadIdx.x) / 32 + W * i) / (N / 16) * 16;
}
template <int N, int W>
__device__ int tile_col(int i) {
  return (static_cast<int>(threadIdx.x) / 32 + W * i) % (N / 16) * 16;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Shared tiles hold values already rounded to TF32, so fragments are
// multiplied as loaded.
__device__ float tf32(float x) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  return wmma::__float_to_tf32(x);
#else
  return x;
#endif
}

// acc[i] += op(a)·op(b) over K for the warp's tiles of the [M, N]
// product; a transposed operand is read as stored, column-major. The row
// lengths are template arguments so the addressing folds to constants.
template <int M, int N, int K, bool kTransA, bool kTransB, int LDA, int LDB, int W>
__device__ void mma_into(Accumulator* acc, const float* a, const float* b) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using LayoutA = std::conditional_t<kTransA, wmma::col_major, wmma::row_major>;
  using LayoutB = std::conditional_t<kTransB, wmma::col_major, wmma::row_major>;
#pragma unroll
  for (int i = 0; i < kTilesPerWarp<M, N, W>; ++i) {
    const int i0 = tile_row<N, W>(i), j0 = tile_col<N, W>(i);
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LayoutA> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LayoutB> fb;
      wmma::load_matrix_sync(fa, kTransA ? a + k0 * LDA + i0 : a + i0 * LDA + k0, LDA);
      wmma::load_matrix_sync(fb, kTransB ? b + j0 * LDB + k0 : b + k0 * LDB + j0, LDB);
      wmma::mma_sync(acc[i], fa, fb, acc[i]);
    }
  }
#else
  __trap();  // flash_attention_fits refuses GPUs without TF32 tensor cores
#endif
}

template <int M, int N, int W>
__device__ void clear(Accumulator* acc) {
#pragma unroll
  for (int i = 0; i < kTilesPerWarp<M, N, W>; ++i) wmma::fill_fragment(acc[i], 0.0f);
}

template <int M, int N, int LDC, int W>
__device__ void store_tiles(float* c, const Accumulator* acc) {
#pragma unroll
  for (int i = 0; i < kTilesPerWarp<M, N, W>; ++i)
    wmma::store_matrix_sync(c + tile_row<N, W>(i) * LDC + tile_col<N, W>(i), acc[i], LDC, wmma::mem_row_major);
}

// The row within its tile of each of this thread's accumulator elements:
// wmma leaves the layout to the implementation, so it is read off a tile
// whose every element is its row number.
struct RowMap {
  int row[Accumulator::num_elements];
};

__device__ RowMap accumulator_rows(float* scratch) {
  for (int at = threadIdx.x; at < 256; at += blockDim.x) scratch[at] = static_cast<float>(at / 16);
  __syncthreads();
  Accumulator tile;
  wmma::load_matrix_sync(tile, scratch, 16, wmma::mem_row_major);
  RowMap map;
  for (int e = 0; e < Accumulator::num_elements; ++e) map.row[e] = static_cast<int>(tile.x[e]);
  __syncthreads();
  return map;
}

// Row r of the warp's tiles of an [M, N] accumulator times factor[r].
template <int M, int N, int W>
__device__ void scale_rows(Accumulator* acc, const float* factor, const RowMap& map) {
#pragma unroll
  for (int i = 0; i < kTilesPerWarp<M, N, W>; ++i) {
    const int i0 = tile_row<N, W>(i);
    for (int e = 0; e < Accumulator::num_elements; ++e) acc[i].x[e] *= factor[i0 + map.row[e]];
  }
}

// Rows [0, valid) of a tile from global rows of D floats, rounded to TF32;
// zeros below.
template <int D>
__device__ void load_rows(float* tile, const float* rows, int64_t valid) {
  for (int at = threadIdx.x; at < kRows<D> * D / 4; at += blockDim.x) {
    const int r = at / (D / 4), c = at % (D / 4) * 4;
    float4 v = r < valid ? *reinterpret_cast<const float4*>(rows + int64_t{r} * D + c) : float4{0, 0, 0, 0};
    v = float4{tf32(v.x), tf32(v.y), tf32(v.z), tf32(v.w)};
    *reinterpret_cast<float4*>(tile + r * kLd<D> + c) = v;
  }
}

// Rows [0, valid) of a tile to global rows of D floats.
template <int D>
__device__ void store_rows(float* rows, const float* tile, int64_t valid) {
  for (int at = threadIdx.x; at < kRows<D> * D / 4; at += blockDim.x) {
    const int r = at / (D / 4), c = at % (D / 4) * 4;
    if (r < valid)
      *reinterpret_cast<float4*>(rows + int64_t{r} * D + c) = *reinterpret_cast<const float4*>(tile + r * kLd<D> + c);
  }
}

// The query block a block of the grid takes: the last ones first, since
// under the causal mask they see the most keys.
__device__ int64_t query_block_start(int rows) { return (int64_t{gridDim.x} - 1 - blockIdx.x) * rows; }

// Shared memory of each kernel: tiles of D columns, tiles of scores, and
// arrays of one number per query row.
template <int D>
constexpr size_t shared_bytes(int d_tiles, int score_tiles, int row_arrays) {
  return sizeof(float) * (d_tiles * kRows<D> * kLd<D> + score_tiles * kRows<D> * kLs<D> + row_arrays * kRows<D>);
}

// The keys each query row of a block sees, kept per row.
template <int D>
__device__ void load_row_visible(int* visible, const AttentionShape& a, int64_t q0, int64_t rows) {
  for (int r = threadIdx.x; r < kRows<D>; r += blockDim.x)
    visible[r] = r < rows ? static_cast<int>(visible_keys(a, q0 + r)) : 0;
}

// The forward pass of one query block of one head: O in the warps'
// accumulators, rescaled as the running maximum of each row grows. With
// `dout` it writes each row's log-sum-exp and rowsum(dO ∘ O) into `stats`
// for the gradient instead of O into y.
template <int D>
__global__ void __launch_bounds__(kWarps<D> * 32, 2)
    flash_forward_kernel(const float* q, const float* k, const float* v, float* y, const float* dout, float* stats,
                         AttentionShape a) {
  constexpr int B = kRows<D>, W = kWarps<D>, LD = kLd<D>, LS = kLs<D>;
  extern __shared__ __align__(32) float shared[];
  float *qs = shared, *ks = qs + B * LD, *vs = ks + B * LD, *ss = vs + B * LD;
  float *row_max = ss + B * LS, *row_sum = row_max + B, *row_scale = row_sum + B;
  int* row_visible = reinterpret_cast<int*>(row_scale + B);
  const RowMap map = accumulator_rows(ss);
  const int64_t head = blockIdx.y, kv = head / a.group, q0 = query_block_start(B);
  const int64_t rows = a.s - q0 < B ? a.s - q0 : B;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  load_rows<D>(qs, q + (head * a.s + q0) * D, rows);
  load_row_visible<D>(row_visible, a, q0, rows);
  for (int r = threadIdx.x; r < B; r += blockDim.x) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  Accumulator o[kTilesPerWarp<B, D, W>];
  clear<B, D, W>(o);
  const int keys = static_cast<int>(visible_keys(a, q0 + rows - 1));
  for (int k0 = 0; k0 < keys; k0 += B) {
    __syncthreads();  // the last block's products are done with ks, vs and ss
    load_rows<D>(ks, k + (kv * a.t + k0) * D, a.t - k0);
    load_rows<D>(vs, v + (kv * a.t + k0) * D, a.t - k0);
    __syncthreads();
    {
      Accumulator scores[kTilesPerWarp<B, B, W>];
      clear<B, B, W>(scores);
      mma_into<B, B, D, false, true, LD, LD, W>(scores, qs, ks);
      store_tiles<B, B, LS, W>(ss, scores);
    }
    __syncthreads();
    // The online softmax: a warp per row turns its scores into weights
    // against the row's new maximum and says by how much what the row has
    // summed so far shrinks.
    for (int r = warp; r < B; r += W) {
      const int visible = row_visible[r] - k0;
      float score[B / 32], block_max = -INFINITY;
      for (int c = 0; c < B / 32; ++c) {
        const int j = lane + 32 * c;
        score[c] = j < visible ? ss[r * LS + j] * a.scale : -INFINITY;
        block_max = fmaxf(block_max, score[c]);
      }
      const float old_max = row_max[r], new_max = fmaxf(old_max, warp_max(block_max));
      const bool none = new_max == -INFINITY;
      const float correction = none ? 1.0f : __expf(old_max - new_max);
      float sum = 0.0f;
      for (int c = 0; c < B / 32; ++c) {
        const float p = none ? 0.0f : tf32(__expf(score[c] - new_max));
        ss[r * LS + lane + 32 * c] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      __syncwarp();  // every lane has read row_max[r]
      if (lane == 0) {
        row_max[r] = new_max;
        row_sum[r] = row_sum[r] * correction + sum;
        row_scale[r] = correction;
      }
    }
    __syncthreads();
    scale_rows<B, D, W>(o, row_scale, map);
    mma_into<B, D, B, false, false, LS, LD, W>(o, ss, vs);
  }
  __syncthreads();
  for (int r = threadIdx.x; r < B; r += blockDim.x)
    row_scale[r] = row_sum[r] > 0 ? 1.0f / row_sum[r] : 0.0f;  // a row seeing no key is 0, as the reference's
  __syncthreads();
  scale_rows<B, D, W>(o, row_scale, map);
  store_tiles<B, D, LD, W>(qs, o);  // Q is no longer read
  __syncthreads();
  if (!dout) {
    store_rows<D>(y + (head * a.s + q0) * D, qs, rows);
    return;
  }
  for (int r = warp; r < rows; r += W) {
    const int64_t row = head * a.s + q0 + r;
    float dot = 0.0f;
    for (int c = lane; c < D; c += 32) dot += qs[r * LD + c] * dout[row * D + c];
    dot = warp_sum(dot);
    if (lane == 0) {
      stats[row] = row_sum[r] > 0 ? row_max[r] + logf(row_sum[r]) : INFINITY;  // +inf: exp(s - lse) = 0
      stats[a.bh * a.s + row] = dot;
    }
  }
}

// A query block's log-sum-exp, rowsum(dO ∘ O) and visible keys into
// shared memory.
template <int D>
__device__ void load_row_stats(float* lse, float* delta, int* visible, const float* stats, const AttentionShape& a,
                               int64_t head, int64_t q0, int64_t rows) {
  const int64_t first_row = head * a.s + q0;
  for (int r = threadIdx.x; r < kRows<D>; r += blockDim.x) {
    lse[r] = r < rows ? stats[first_row + r] : INFINITY;
    delta[r] = r < rows ? stats[a.bh * a.s + first_row + r] : 0.0f;
  }
  load_row_visible<D>(visible, a, q0, rows);
}

// S = Q·Kᵀ into ss and dP = dO·Vᵀ into dps, then the weights
// P = exp(S·scale − lse), masked, and dS = P ∘ (dP − rowsum(dO ∘ O))·scale
// in their place, rounded to TF32 for the products that follow.
template <int D>
__device__ void score_gradients(float* ss, float* dps, const float* qs, const float* ks, const float* dos,
                                const float* vs, const float* lse, const float* delta, const int* visible, int k0,
                                float scale) {
  constexpr int B = kRows<D>, W = kWarps<D>, LD = kLd<D>, LS = kLs<D>;
  {
    Accumulator product[kTilesPerWarp<B, B, W>];
    clear<B, B, W>(product);
    mma_into<B, B, D, false, true, LD, LD, W>(product, qs, ks);
    store_tiles<B, B, LS, W>(ss, product);
    clear<B, B, W>(product);
    mma_into<B, B, D, false, true, LD, LD, W>(product, dos, vs);
    store_tiles<B, B, LS, W>(dps, product);
  }
  __syncthreads();
  for (int at = threadIdx.x; at < B * B; at += blockDim.x) {
    const int r = at / B, c = at % B;
    const float p = c < visible[r] - k0 ? __expf(ss[r * LS + c] * scale - lse[r]) : 0.0f;
    ss[r * LS + c] = tf32(p);
    dps[r * LS + c] = tf32(p * (dps[r * LS + c] - delta[r]) * scale);
  }
}

// dK and dV of one key block of one k/v head, summed in the warps'
// accumulators over the rows of every query head of its group that see
// the block.
template <int D>
__global__ void __launch_bounds__(kWarps<D> * 32, 2)
    flash_key_grad_kernel(const float* dout, const float* q, const float* k, const float* v, float* dk, float* dv,
                          const float* stats, AttentionShape a) {
  constexpr int B = kRows<D>, W = kWarps<D>, LD = kLd<D>, LS = kLs<D>;
  extern __shared__ __align__(32) float shared[];
  float *ks = shared, *vs = ks + B * LD, *qs = vs + B * LD, *dos = qs + B * LD, *ss = dos + B * LD;
  float *dps = ss + B * LS, *lse = dps + B * LS, *delta = lse + B;
  int* visible = reinterpret_cast<int*>(delta + B);
  const int64_t kv = blockIdx.y;
  const int k0 = static_cast<int>(blockIdx.x) * B;
  const int64_t keys = a.t - k0 < B ? a.t - k0 : B;
  load_rows<D>(ks, k + (kv * a.t + k0) * D, keys);
  load_rows<D>(vs, v + (kv * a.t + k0) * D, keys);
  Accumulator dk_acc[kTilesPerWarp<B, D, W>], dv_acc[kTilesPerWarp<B, D, W>];
  clear<B, D, W>(dk_acc);
  clear<B, D, W>(dv_acc);
  // Under the causal mask query i sees key k0 from first_query + i >= k0.
  const int64_t first = a.causal && k0 > a.first_query ? (k0 - a.first_query) / B * B : 0;
  for (int64_t head = kv * a.group; head < (kv + 1) * a.group; ++head) {
    for (int64_t q0 = first; q0 < a.s; q0 += B) {
      const int64_t rows = a.s - q0 < B ? a.s - q0 : B;
      __syncthreads();  // the last block's products are done with qs, dos, ss and dps
      load_rows<D>(qs, q + (head * a.s + q0) * D, rows);
      load_rows<D>(dos, dout + (head * a.s + q0) * D, rows);
      load_row_stats<D>(lse, delta, visible, stats, a, head, q0, rows);
      __syncthreads();
      score_gradients<D>(ss, dps, qs, ks, dos, vs, lse, delta, visible, k0, a.scale);
      __syncthreads();
      mma_into<B, D, B, true, false, LS, LD, W>(dv_acc, ss, dos);  // dV += Pᵀ·dO
      mma_into<B, D, B, true, false, LS, LD, W>(dk_acc, dps, qs);  // dK += dSᵀ·Q
    }
  }
  __syncthreads();
  store_tiles<B, D, LD, W>(ks, dk_acc);
  store_tiles<B, D, LD, W>(vs, dv_acc);
  __syncthreads();
  store_rows<D>(dk + (kv * a.t + k0) * D, ks, keys);
  store_rows<D>(dv + (kv * a.t + k0) * D, vs, keys);
}

// dQ of one query block of one head, summed in the warps' accumulators
// over the keys it sees.
template <int D>
__global__ void __launch_bounds__(kWarps<D> * 32, 2)
    flash_query_grad_kernel(const float* dout, const float* q, const float* k, const float* v, float* dq,
                            const float* stats, AttentionShape a) {
  constexpr int B = kRows<D>, W = kWarps<D>, LD = kLd<D>, LS = kLs<D>;
  extern __shared__ __align__(32) float shared[];
  float *qs = shared, *dos = qs + B * LD, *ks = dos + B * LD, *vs = ks + B * LD, *ss = vs + B * LD;
  float *dps = ss + B * LS, *lse = dps + B * LS, *delta = lse + B;
  int* visible = reinterpret_cast<int*>(delta + B);
  const int64_t head = blockIdx.y, kv = head / a.group, q0 = query_block_start(B);
  const int64_t rows = a.s - q0 < B ? a.s - q0 : B;
  load_rows<D>(qs, q + (head * a.s + q0) * D, rows);
  load_rows<D>(dos, dout + (head * a.s + q0) * D, rows);
  load_row_stats<D>(lse, delta, visible, stats, a, head, q0, rows);
  Accumulator dq_acc[kTilesPerWarp<B, D, W>];
  clear<B, D, W>(dq_acc);
  const int keys = static_cast<int>(visible_keys(a, q0 + rows - 1));
  for (int k0 = 0; k0 < keys; k0 += B) {
    __syncthreads();  // the last block's products are done with ks, vs, ss and dps
    load_rows<D>(ks, k + (kv * a.t + k0) * D, a.t - k0);
    load_rows<D>(vs, v + (kv * a.t + k0) * D, a.t - k0);
    __syncthreads();
    score_gradients<D>(ss, dps, qs, ks, dos, vs, lse, delta, visible, k0, a.scale);
    __syncthreads();
    mma_into<B, D, B, false, false, LS, LD, W>(dq_acc, dps, ks);  // dQ += dS·K
  }
  __syncthreads();
  store_tiles<B, D, LD, W>(qs, dq_acc);  // Q is no longer read
  __syncthreads();
  store_rows<D>(dq + (head * a.s + q0) * D, qs, rows);
}

template <typename Kernel>
cudaError_t allow_shared(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

dim3 query_grid(const AttentionShape& a, int rows) {
  return dim3(static_cast<unsigned>((a.s + rows - 1) / rows), static_cast<unsigned>(a.bh));
}

template <int D>
cudaError_t forward(const float* q, const float* k, const float* v, float* y, const float* dout, float* stats,
                    const AttentionShape& a, cudaStream_t s) {
  constexpr size_t bytes = shared_bytes<D>(3, 1, 4);
  if (cudaError_t e = allow_shared(flash_forward_kernel<D>, bytes); e != cudaSuccess) return e;
  flash_forward_kernel<D><<<query_grid(a, kRows<D>), kWarps<D> * 32, bytes, s>>>(q, k, v, y, dout, stats, a);
  return cudaGetLastError();
}

template <int D>
cudaError_t backward(const float* dout, const float* q, const float* k, const float* v, float* dq, float* dk,
                     float* dv, float* stats, const AttentionShape& a, cudaStream_t s) {
  if (cudaError_t e = forward<D>(q, k, v, nullptr, dout, stats, a, s); e != cudaSuccess) return e;
  constexpr size_t key_bytes = shared_bytes<D>(4, 2, 3), query_bytes = shared_bytes<D>(4, 2, 3);
  if (cudaError_t e = allow_shared(flash_key_grad_kernel<D>, key_bytes); e != cudaSuccess) return e;
  if (cudaError_t e = allow_shared(flash_query_grad_kernel<D>, query_bytes); e != cudaSuccess) return e;
  const dim3 key_grid(static_cast<unsigned>((a.t + kRows<D> - 1) / kRows<D>), static_cast<unsigned>(a.bh / a.group));
  flash_key_grad_kernel<D><<<key_grid, kWarps<D> * 32, key_bytes, s>>>(dout, q, k, v, dk, dv, stats, a);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  flash_query_grad_kernel<D><<<query_grid(a, kRows<D>), kWarps<D> * 32, query_bytes, s>>>(dout, q, k, v, dq, stats, a);
  return cudaGetLastError();
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool flash_attention_fits(const AttentionShape& a, const void* q, const void* k, const void* v, int compute_major) {
  return compute_major >= 8 && (a.d == 64 || a.d == 128) && a.e == a.d && a.s > 0 && a.t > 0 && a.group > 0 &&
         a.bh % a.group == 0 && a.bh <= 65535 && aligned(q) && aligned(k) && aligned(v);
}

cudaError_t flash_attention(const float* q, const float* k, const float* v, float* y, const AttentionShape& a,
                            cudaStream_t s) {
  return a.d == 64 ? forward<64>(q, k, v, y, nullptr, nullptr, a, s) : forward<128>(q, k, v, y, nullptr, nullptr, a, s);
}

cudaError_t flash_attention_grad(const float* dout, const float* q, const float* k, const float* v, float* dq, float* dk,
                                 float* dv, float* stats, const AttentionShape& a, cudaStream_t s) {
  return a.d == 64 ? backward<64>(dout, q, k, v, dq, dk, dv, stats, a, s)
                   : backward<128>(dout, q, k, v, dq, dk, dv, stats, a, s);
}

}  // namespace dstc::cuda
