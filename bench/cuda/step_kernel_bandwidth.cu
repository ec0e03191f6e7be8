// Memory bandwidth of dstc run's CUDA step kernels (backends/cuda/step_kernels.h)
// at GPT-2 117M's training shapes (batch 8 x 1024 tokens, width 768, MLP 3072,
// vocabulary 50257), against a device-to-device copy on the same GPU and the
// data sheet's HBM bandwidth given on the command line (issue #20: streaming
// kernels above 80 % of it). Each kernel's bytes are those it must move:
// every input read once, every output written once.
// Usage: dstc_step_kernel_bandwidth [HBM_BYTES_PER_S]
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <cuda_runtime.h>

#include "backends/cuda/step_kernels.h"

namespace {

using dstc::cuda::BinaryOp;

// The best of 20 timed launches after 3 untimed ones, in seconds.
double best_seconds(const std::function<cudaError_t()>& launch) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double best = 1e30;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(start);
    if (cudaError_t e = launch(); e != cudaSuccess) {
      std::fprintf(stderr, "launch failed: %s\n", cudaGetErrorString(e));
      std::exit(1);
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3 && ms * 1e-3 < best) best = ms * 1e-3;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

float* device_floats(size_t n, float value) {
  float* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc of %zu floats failed\n", n);
    std::exit(1);
  }
  std::vector<float> host(n, value);
  cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const double hbm = argc > 1 ? std::atof(argv[1]) : 3.35e12;
  const int64_t tokens = 8 * 1024, h = 768, ffn = 3072, vocab = 50257;
  const size_t big = static_cast<size_t>(tokens) * vocab;
  float *a = device_floats(big, 0.5f), *b = device_floats(big, 0.25f), *y = device_floats(big, 0.0f);
  float *m = device_floats(tokens * ffn, 0.1f), *v = device_floats(tokens * ffn, 0.2f);
  float *w_out = device_floats(tokens * ffn, 0.0f), *m_out = device_floats(tokens * ffn, 0.0f);
  float *v_out = device_floats(tokens * ffn, 0.0f), *stats = device_floats(2 * tokens, 0.0f);
  float *labels = device_floats(tokens, 3.0f), *dloss = device_floats(1, 1.0f);
  int* bad = nullptr;
  cudaMalloc(&bad, sizeof(int));
  cudaStream_t s = nullptr;

  struct Row {
    const char* name;
    double bytes;
    std::function<cudaError_t()> launch;
  };
  const double f = sizeof(float);
  const int64_t n_ffn = tokens * ffn, n_h = tokens * h;
  // Causal scores: a row reads its visible half and writes all of it.
  dstc::cuda::AttentionShape causal{};
  causal.bh = 96;
  causal.s = causal.t = 1024;
  causal.d = causal.e = 64;
  causal.group = 1;
  causal.causal = true;
  causal.scale = 0.125f;
  const dstc::cuda::AdamStep adam{1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.1f, 0.001f};
  std::vector<Row> rows = {
      {"copy (cudaMemcpyAsync, device to device), 8192x3072", 2 * f * n_ffn,
       [&] { return cudaMemcpyAsync(y, a, f * n_ffn, cudaMemcpyDeviceToDevice, s); }},
      {"fill, 8192x3072", f * n_ffn, [&] { return dstc::cuda::fill(y, n_ffn, 0.0f, s); }},
      {"scale, 8192x3072", 2 * f * n_ffn, [&] { return dstc::cuda::scale(a, y, n_ffn, 2.0f, s); }},
      {"add (residual), 8192x768", 3 * f * n_h,
       [&] { return dstc::cuda::binary(BinaryOp::Add, a, b, y, n_h, n_h, s); }},
      {"add (bias, broadcast), 8192x3072 + 3072", 2 * f * n_ffn + f * ffn,
       [&] { return dstc::cuda::binary(BinaryOp::Add, a, b, y, n_ffn, ffn, s); }},
      {"gelu, 8192x3072", 2 * f * n_ffn, [&] { return dstc::cuda::pointwise_forward(0, a, y, n_ffn, s); }},
      {"gelu gradient, 8192x3072", 3 * f * n_ffn, [&] { return dstc::cuda::pointwise_backward(0, a, b, y, n_ffn, s); }},
      {"layer norm, 8192x768", 2 * f * n_h + 2 * f * h,
       [&] { return dstc::cuda::layernorm(a, b, m, y, tokens, h, 1e-5f, s); }},
      {"layer norm gradient, 8192x768", 3 * f * n_h + f * h,
       [&] { return dstc::cuda::layernorm_grad(a, b, m, y, tokens, h, 1e-5f, s); }},
      {"layer norm weight gradient, 8192x768", 2 * f * n_h + 2 * f * h,
       [&] { return dstc::cuda::layernorm_weight_grad(a, b, y, m_out, stats, tokens, h, 1e-5f, s); }},
      {"softmax, 8192x1024", 2 * f * tokens * 1024,
       [&] { return dstc::cuda::softmax(a, y, tokens, 1024, 1, false, s); }},
      {"rms norm, 8192x4096 (a block a row)", 2 * f * tokens * 4096 + f * 4096,
       [&] { return dstc::cuda::rms_norm(a, b, y, tokens, 4096, 1e-5f, s); }},
      {"attention softmax, causal, 96 x 1024 rows of 1024", 1.5 * f * 96 * 1024 * 1024,
       [&] { return dstc::cuda::attention_softmax(y, 96 * 1024, causal, s); }},
      {"cross-entropy gradient, 8192x50257", 2 * f * big,
       [&] { return dstc::cuda::cross_entropy_grad(dloss, a, labels, y, bad, tokens, vocab, tokens, s); }},
      {"adam, 25.2M parameters", 7 * f * n_ffn,
       [&] { return dstc::cuda::adam(a, b, m, v, w_out, m_out, v_out, n_ffn, adam, s); }},
      {"concat (3 parts of 768 into 2304-wide rows)", 2 * f * tokens * 2304,
       [&] {
         for (int part = 0; part < 3; ++part) {
           cudaError_t e = dstc::cuda::copy_rows(a, y, tokens, h, 0, 3 * h, part * h, h, 1, s);
           if (e != cudaSuccess) return e;
         }
         return cudaSuccess;
       }},
  };
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s; data-sheet HBM bandwidth %.3g TB/s\n", prop.name, hbm / 1e12);
  std::printf("%-48s %10s %10s %8s\n", "kernel", "time us", "GB/s", "of HBM");
  for (const Row& row : rows) {
    const double t = best_seconds(row.launch);
    std::printf("%-48s %10.1f %10.0f %7.1f%%\n", row.name, t * 1e6, row.bytes / t / 1e9, 100 * row.bytes / t / hbm);
  }
  return 0;
}
