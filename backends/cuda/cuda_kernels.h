// The few kernels calibration needs besides cuBLASLt's: random fills in
// every element type (zeros would run faster than real data: tensor cores
// draw less power on them), a streaming add and an empty kernel.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace dstc::cuda {

enum class ElementType { F32, F16, BF16, E4M3 };

// Uniform values in [-1, 1) from a hash of the index and the seed.
cudaError_t fill_uniform(void* data, ElementType type, int64_t elements, uint32_t seed, cudaStream_t stream);
cudaError_t add_f32(const float* a, const float* b, float* c, int64_t elements, cudaStream_t stream);
cudaError_t launch_empty(cudaStream_t stream);

}  // namespace dstc::cuda
