#include <cstdio>
#include <cuda_runtime.h>
#include "flash_attention.h"
using namespace dstc::cuda;
__global__ void init(float* x, long n, unsigned seed) {
  for (long i = blockIdx.x * 256L + threadIdx.x; i < n; i += gridDim.x * 256L) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    x[i] = (h % 2001) / 1000.0f - 1.0f;
  }
}
int main() {
  for (int d : {64, 128}) {
    AttentionShape a{};
    a.bh = d == 64 ? 96 : 64; a.s = 1024; a.t = 1024; a.d = d; a.e = d; a.group = 1; a.first_query = 0; a.causal = true; a.scale = 0.125f;
    long n = a.bh * a.s * d;
    float *q, *k, *v, *o, *dout, *dq, *dk, *dv, *stats;
    cudaMalloc(&q, n * 4); cudaMalloc(&k, n * 4); cudaMalloc(&v, n * 4); cudaMalloc(&o, n * 4); cudaMalloc(&dout, n * 4);
    cudaMalloc(&dq, n * 4); cudaMalloc(&dk, n * 4); cudaMalloc(&dv, n * 4); cudaMalloc(&stats, 2 * a.bh * a.s * 4);
    init<<<1024, 256>>>(q, n, 1); init<<<1024, 256>>>(k, n, 2); init<<<1024, 256>>>(v, n, 3); init<<<1024, 256>>>(dout, n, 4);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int pass = 0; pass < 2; ++pass) {
      float best_f = 1e9, best_b = 1e9, ms;
      for (int it = 0; it < 10; ++it) {
        cudaEventRecord(e0); flash_attention(q, k, v, o, a, 0); cudaEventRecord(e1); cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1); if (ms < best_f) best_f = ms;
        cudaEventRecord(e0); flash_attention_grad(dout, q, k, v, dq, dk, dv, stats, a, 0); cudaEventRecord(e1); cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1); if (ms < best_b) best_b = ms;
      }
      double unit = 2.0 * a.bh * a.s * a.t * d / 2;  // one causal product
      if (pass == 1) printf("%s d=%d bh=%ld: forward %.3f ms (%.1f TFLOP/s), grad %.3f ms (%.1f TFLOP/s counting 9 products) err=%s\n",
        VARIANT, d, (long)a.bh, best_f, 2 * unit / best_f / 1e9, best_b, 9 * unit / best_b / 1e9, cudaGetErrorString(cudaGetLastError()));
    }
    float h[4]; cudaMemcpy(h, o + 12345, 16, cudaMemcpyDeviceToHost); printf("  o sample %g %g %g %g\n", h[0], h[1], h[2], h[3]);
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(dout); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(stats);
  }
}
