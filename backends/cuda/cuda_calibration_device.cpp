// The calibration device on the local CUDA GPU: matmuls through cuBLASLt
// (the library PyTorch, Megatron-Core and Transformer Engine call, so its
// rates are what training gets), timed with CUDA events.
#include <algorithm>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "backends/calibration/calibration_device.h"
#include "backends/cuda/cuda_kernels.h"

namespace dstc::calibration {
namespace {

using htae::ComputeDtype;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw DeviceError(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw DeviceError(fmt::format("{}: {}", what, cublasLtGetStatusString(status)));
}

// Device memory that grows to the largest size asked of it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(data_); }
  void* reserve(size_t bytes) {
    if (bytes > size_) {
      check(cudaFree(data_), "cudaFree");
      data_ = nullptr;
      check(cudaMalloc(&data_, bytes), "cudaMalloc");
      size_ = bytes;
    }
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

struct MatmulTypes {
  cudaDataType_t inputs;
  cudaDataType_t output;
  cublasComputeType_t compute;
  cuda::ElementType fill;
  size_t input_bytes;
  size_t output_bytes;
};

MatmulTypes matmul_types(ComputeDtype dtype) {
  switch (dtype) {
    case ComputeDtype::Fp32: return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, cuda::ElementType::F32, 4, 4};
    case ComputeDtype::Tf32:
      return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, cuda::ElementType::F32, 4, 4};
    case ComputeDtype::Fp16: return {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, cuda::ElementType::F16, 2, 2};
    case ComputeDtype::Bf16: return {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, cuda::ElementType::BF16, 2, 2};
    case ComputeDtype::Fp8: return {CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, cuda::ElementType::E4M3, 1, 2};
  }
  throw DeviceError("unknown dtype");
}

constexpr int kWarmups = 3;
constexpr int kSamples = 7;
constexpr double kSampleSeconds = 1e-3;
constexpr size_t kWorkspaceBytes = 32 << 20;  // cuBLAS's recommendation for Hopper

class CudaCalibrationDevice final : public CalibrationDevice {
 public:
  explicit CudaCalibrationDevice(int device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaGetDeviceProperties(&props_, device), "cudaGetDeviceProperties");
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
    workspace_.reserve(kWorkspaceBytes);
  }
  ~CudaCalibrationDevice() override {
    cublasLtDestroy(lt_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return props_.name; }
  int64_t memory_bytes() const override { return static_cast<int64_t>(props_.totalGlobalMem); }

  bool supports(ComputeDtype dtype) const override {
    int cc = props_.major * 10 + props_.minor;
    switch (dtype) {
      case ComputeDtype::Fp32: return true;
      case ComputeDtype::Fp16: return cc >= 70;
      case ComputeDtype::Tf32:
      case ComputeDtype::Bf16: return cc >= 80;
      case ComputeDtype::Fp8: return cc >= 89;
    }
    return false;
  }

  std::optional<double> matmul_seconds(ComputeDtype dtype, MatmulShape s) override {
    MatmulTypes t = matmul_types(dtype);
    // "TN", the layout FP8 GEMMs require and a linear layer's forward uses:
    // A stored k x m and transposed, B stored k x n, D m x n, column-major.
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    auto release = [&] {
      if (preference) cublasLtMatmulPreferenceDestroy(preference);
      if (d) cublasLtMatrixLayoutDestroy(d);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (op) cublasLtMatmulDescDestroy(op);
    };
    try {
      check(cublasLtMatmulDescCreate(&op, t.compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
      cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
      check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
            "cublasLtMatmulDescSetAttribute");
      check(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep),
            "cublasLtMatmulDescSetAttribute");
      check(cublasLtMatrixLayoutCreate(&a, t.inputs, s.k, s.m, s.k), "cublasLtMatrixLayoutCreate");
      check(cublasLtMatrixLayoutCreate(&b, t.inputs, s.k, s.n, s.k), "cublasLtMatrixLayoutCreate");
      check(cublasLtMatrixLayoutCreate(&d, t.output, s.m, s.n, s.m), "cublasLtMatrixLayoutCreate");
      check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
      size_t workspace = kWorkspaceBytes;
      check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof workspace),
            "cublasLtMatmulPreferenceSetAttribute");
      cublasLtMatmulHeuristicResult_t heuristic{};
      int found = 0;
      cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt_, op, a, b, d, d, preference, 1, &heuristic, &found);
      if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
        release();
        return std::nullopt;
      }
      check(status, "cublasLtMatmulAlgoGetHeuristic");
      void* pa = a_.reserve(static_cast<size_t>(s.m * s.k) * t.input_bytes);
      void* pb = b_.reserve(static_cast<size_t>(s.k * s.n) * t.input_bytes);
      void* pd = d_.reserve(static_cast<size_t>(s.m * s.n) * t.output_bytes);
      check(cuda::fill_uniform(pa, t.fill, s.m * s.k, 1, stream_), "fill");
      check(cuda::fill_uniform(pb, t.fill, s.k * s.n, 2, stream_), "fill");
      float alpha = 1, beta = 0;
      void* ws = workspace_.reserve(kWorkspaceBytes);
      double seconds = median_seconds([&] {
        check(cublasLtMatmul(lt_, op, &alpha, pa, a, pb, b, &beta, pd, d, pd, d, &heuristic.algo, ws, kWorkspaceBytes,
                             stream_),
              "cublasLtMatmul");
      });
      release();
      return seconds;
    } catch (...) {
      release();
      throw;
    }
  }

  double add_seconds(int64_t elements) override {
    size_t bytes = static_cast<size_t>(elements) * sizeof(float);
    auto* pa = static_cast<float*>(a_.reserve(bytes));
    auto* pb = static_cast<float*>(b_.reserve(bytes));
    auto* pc = static_cast<float*>(d_.reserve(bytes));
    check(cuda::fill_uniform(pa, cuda::ElementType::F32, elements, 3, stream_), "fill");
    check(cuda::fill_uniform(pb, cuda::ElementType::F32, elements, 4, stream_), "fill");
    return median_seconds([&] { check(cuda::add_f32(pa, pb, pc, elements, stream_), "add kernel"); });
  }

  double launch_seconds() override {
    constexpr int kLaunches = 2000;
    for (int i = 0; i < 100; ++i) check(cuda::launch_empty(stream_), "empty kernel");
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < kLaunches; ++i) check(cuda::launch_empty(stream_), "empty kernel");
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    return elapsed() / kLaunches;
  }

 private:
  // Each sample times a batch of back-to-back runs, as a training step
  // queues its kernels, so a short kernel's time is not the host's time to
  // enqueue it; the batch lasts about kSampleSeconds.
  template <typename Run>
  double median_seconds(Run run) {
    for (int i = 0; i < kWarmups; ++i) run();
    double once = timed(run, 1);
    int batch = static_cast<int>(std::clamp(kSampleSeconds / std::max(once, 1e-9), 1.0, 200.0));
    std::vector<double> times;
    for (int i = 0; i < kSamples; ++i) times.push_back(timed(run, batch) / batch);
    std::nth_element(times.begin(), times.begin() + kSamples / 2, times.end());
    return times[kSamples / 2];
  }

  template <typename Run>
  double timed(Run run, int times) {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < times; ++i) run();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    return elapsed();
  }

  double elapsed() {
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms * 1e-3;
  }

  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer workspace_, a_, b_, d_;
};

}  // namespace

LocalGpu open_local_gpu() {
  LocalGpu gpu;
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess || count == 0) {
    gpu.why_not = status != cudaSuccess ? fmt::format("no usable CUDA device: {}", cudaGetErrorString(status))
                                        : "no CUDA device found";
    return gpu;
  }
  try {
    gpu.device = std::make_unique<CudaCalibrationDevice>(0);
  } catch (const DeviceError& e) {
    gpu.why_not = e.what();
  }
  return gpu;
}

}  // namespace dstc::calibration
