// Attention fused as FlashAttention-2 tiles it (Dao, 2023): a block of
// queries streams over blocks of keys with an online softmax, so the
// scores never leave shared memory; the products run on the tensor cores
// in TF32 (wmma), so the device uses it only where the user asked for
// tensor-core GEMMs (--gemm-precision tf32 or bf16).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "backends/cuda/step_kernels.h"

namespace dstc::cuda {

// Whether the fused kernels take this shape: a head dim of 64 or 128, the
// values' equal to the queries', 16-byte aligned operands, and a GPU of
// compute capability 8.0 or later (TF32 tensor cores).
bool flash_attention_fits(const AttentionShape& a, const void* q, const void* k, const void* v, int compute_major);

cudaError_t flash_attention(const float* q, const float* k, const float* v, float* y, const AttentionShape& a,
                            cudaStream_t s);

// Its gradient, every element of dq, dk and dv written: a forward pass
// gives each query row's log-sum-exp and rowsum(dO ∘ O) (`stats`, 2·bh·s
// floats of workspace), then one kernel per key block sums dK and dV over
// the queries that see it and one per query block sums dQ over its keys.
// Neither uses atomics, so the gradients are the same from run to run.
cudaError_t flash_attention_grad(const float* dout, const float* q, const float* k, const float* v, float* dq, float* dk,
                                 float* dv, float* stats, const AttentionShape& a, cudaStream_t s);

}  // namespace dstc::cuda
