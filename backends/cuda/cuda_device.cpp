// The CUDA device of dstc run (backends/runtime/device.h): every value an
// f32 buffer on the GPU from CUDA's stream-ordered pool (after the first
// step no memory is taken from the driver), ops on one stream with the
// kernels of step_kernels.h. The ops it has kernels for are its kernel
// table (CudaDevice::kernels); a program with others is refused before its
// first step.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "backends/cuda/step_kernels.h"
#include "backends/reference/op_context.h"
#include "backends/runtime/device.h"
#include "ir/einsum_gemm.h"
#include "ir/pointwise_ops.h"
#include "ir/registry.h"

namespace dstc::runtime {

namespace {

using ir::OpKind;
using reference::first_class;
using reference::first_row;
using reference::normalized;
using reference::operand_placement;
using reference::result_placement;

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw CudaError(fmt::format("{}: {}", what, cudaGetErrorString(status)));
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw CudaError(fmt::format("{}: {}", what, cublasLtGetStatusString(status)));
}

constexpr size_t kWorkspaceBytes = 32 << 20;  // cuBLAS's recommendation for Hopper

// The cuBLASLt call of one GEMM plan: descriptors and the heuristic's
// algorithm, made once per plan.
struct GemmCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~GemmCall() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// Row-major y[m, n] = op(L)[m, k] · op(R)[k, n] is column-major
// y^T[n, m] = op(R)^T · op(L)^T: cuBLAS's A is R, its B is L. FP32 inputs
// and outputs; the compute reads them as `precision` says (f32 by default,
// so the step matches the reference's f32).
std::unique_ptr<GemmCall> make_gemm_call(cublasLtHandle_t lt, const ir::GemmPlan& p, GemmPrecision precision) {
  auto call = std::make_unique<GemmCall>();
  const cublasComputeType_t compute = precision == GemmPrecision::TF32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : precision == GemmPrecision::BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                         : CUBLAS_COMPUTE_32F;
  check(cublasLtMatmulDescCreate(&call->desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  cublasOperation_t op_a = p.transpose_r ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = p.transpose_l ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(call->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b), "TRANSB");
  auto layout = [&](cublasLtMatrixLayout_t* l, int64_t rows, int64_t cols, int64_t stride) {
    check(cublasLtMatrixLayoutCreate(l, CUDA_R_32F, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows),
          "cublasLtMatrixLayoutCreate");
    int32_t count = static_cast<int32_t>(p.batch);
    check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count), "BATCH");
    check(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
          "STRIDE");
  };
  // R stored [k, n] row-major is column-major [n, k]; stored [n, k] it is [k, n].
  layout(&call->a, p.transpose_r ? p.k : p.n, p.transpose_r ? p.n : p.k, p.k * p.n);
  layout(&call->b, p.transpose_l ? p.m : p.k, p.transpose_l ? p.k : p.m, p.m * p.k);
  layout(&call->c, p.n, p.m, p.m * p.n);
  cublasLtMatmulPreference_t preference = nullptr;
  check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  size_t workspace = kWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof workspace),
        "MAX_WORKSPACE_BYTES");
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt, call->desc, call->a, call->b, call->c, call->c, preference, 1, &found, &count);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || count == 0) return nullptr;
  call->algo = found.algo;
  return call;
}

struct CudaValue final : DeviceValue {
  CudaValue(std::vector<int64_t> dims, ir::DType t, cudaStream_t s) : shape(std::move(dims)), dtype(t), stream(s) {
    elements = 1;
    for (int64_t d : shape) elements *= d;
    if (elements > 0) {
      check(cudaMallocAsync(&data, static_cast<size_t>(elements) * sizeof(float), stream), "cudaMallocAsync");
      storage.reset(data, [s](float* p) { cudaFreeAsync(p, s); });
    }
  }
  // A value over `source`'s floats (a reshape, or a cast: f32 storage holds
  // every float dtype alike). Values are never written after their op, so
  // sharing is safe.
  CudaValue(std::vector<int64_t> dims, ir::DType t, const CudaValue& source)
      : shape(std::move(dims)),
        dtype(t),
        stream(source.stream),
        elements(source.elements),
        storage(source.storage),
        data(source.data) {}
  std::vector<int64_t> shape;
  ir::DType dtype;
  cudaStream_t stream;
  int64_t elements = 0;
  std::shared_ptr<float> storage;  // freed (stream-ordered) with its last value
  float* data = nullptr;
};

const CudaValue& cuda_value(const DeviceValue& v) { return static_cast<const CudaValue&>(v); }

// Row of `kind` (forward or grad) in ir/pointwise_ops.def, or -1.
int activation_row(OpKind kind) {
  std::span<const ir::PointwiseOp> table = ir::pointwise_ops();
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].kind == kind || table[i].grad == kind) return static_cast<int>(i);
  return -1;
}

// x's dims split into y's (kept) and the summed ones.
cuda::ReduceShape reduce_shape(const std::vector<int64_t>& shape, std::span<const int64_t> dims) {
  cuda::ReduceShape r;
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(normalized(d, static_cast<int>(shape.size())))] = true;
  int64_t stride = 1;
  std::vector<int64_t> strides(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      r.reduced_size[r.reduced] = shape[d];
      r.reduced_stride[r.reduced++] = strides[d];
    } else {
      r.kept_size[r.kept] = shape[d];
      r.kept_stride[r.kept++] = strides[d];
    }
  }
  return r;
}

// The einsum `spec` ("bsh,hf->bsf") over operands of these shapes, or
// nullopt when it has more letters or operands than the kernel takes.
std::optional<cuda::EinsumShape> einsum_shape(std::string_view spec, const std::vector<const CudaValue*>& in) {
  size_t arrow = spec.find("->");
  if (arrow == std::string_view::npos || in.empty() || in.size() > 2) return std::nullopt;
  std::string_view lhs = spec.substr(0, arrow), output = spec.substr(arrow + 2);
  std::vector<std::string_view> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (terms.size() != in.size()) return std::nullopt;
  std::string letters(output);  // output letters first, summed letters after
  for (std::string_view t : terms)
    for (char c : t)
      if (letters.find(c) == std::string::npos) letters += c;
  if (letters.size() > static_cast<size_t>(cuda::kMaxLetters)) return std::nullopt;
  cuda::EinsumShape e{};
  e.operands = static_cast<int>(in.size());
  e.letters = static_cast<int>(letters.size());
  e.out_letters = static_cast<int>(output.size());
  for (int l = 0; l < cuda::kMaxLetters; ++l) e.size[l] = 1;
  for (size_t k = 0; k < terms.size(); ++k) {
    const std::vector<int64_t>& shape = in[k]->shape;
    if (terms[k].size() != shape.size()) return std::nullopt;
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      size_t l = letters.find(terms[k][d]);
      e.size[l] = shape[d];
      e.stride[k][l] += stride;  // a repeated letter walks the diagonal
      stride *= shape[d];
    }
  }
  return e;
}

// A tensor as [outer, n, inner] around dim.
struct Blocks {
  int64_t outer = 1, n = 1, inner = 1;
};
Blocks blocks_along(const std::vector<int64_t>& shape, int dim) {
  Blocks b;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < dim) b.outer *= shape[static_cast<size_t>(d)];
    if (d > dim) b.inner *= shape[static_cast<size_t>(d)];
  }
  b.n = shape[static_cast<size_t>(dim)];
  return b;
}

// Rows of the last dim.
struct Rows {
  int64_t rows = 0, h = 1;
};
Rows rows_of(const CudaValue& x) {
  Rows r;
  r.h = x.shape.empty() ? 1 : x.shape.back();
  r.rows = r.h > 0 ? x.elements / r.h : 0;
  return r;
}

int rank_of(const CudaValue& x) { return static_cast<int>(x.shape.size()); }

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

// Walks `shape`; each dim not in `dims` steps through the tensor that
// lacks `dims` (row-major), the dims in `dims` not at all.
cuda::StridedShape reduced_strides(const std::vector<int64_t>& shape, std::span<const int64_t> dims) {
  const int rank = static_cast<int>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t d : dims) reduced[static_cast<size_t>(normalized(d, rank))] = true;
  std::vector<int64_t> kept;
  for (int d = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)]) kept.push_back(shape[static_cast<size_t>(d)]);
  std::vector<int64_t> kept_strides = row_major_strides(kept);
  cuda::StridedShape s{};
  s.dims = rank;
  for (int d = 0, k = 0; d < rank; ++d) {
    s.size[d] = shape[static_cast<size_t>(d)];
    s.stride[d] = reduced[static_cast<size_t>(d)] ? 0 : kept_strides[static_cast<size_t>(k++)];
  }
  return s;
}

// y = x with its dims permuted: y's dim d is x's dim perm[d].
cuda::StridedShape transposed(const std::vector<int64_t>& x_shape, std::span<const int64_t> perm) {
  std::vector<int64_t> strides = row_major_strides(x_shape);
  cuda::StridedShape s{};
  s.dims = static_cast<int>(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    s.size[d] = x_shape[static_cast<size_t>(perm[d])];
    s.stride[d] = strides[static_cast<size_t>(perm[d])];
  }
  return s;
}

// The routes of gates [..., tokens, experts] into slots [..., capacity, width].
cuda::Routes routes(const CudaValue& gates, const CudaValue& slots) {
  const size_t r = gates.shape.size(), sr = slots.shape.size();
  cuda::Routes routes{};
  routes.tokens = gates.shape[r - 2];
  routes.experts = gates.shape[r - 1];
  routes.groups = routes.tokens * routes.experts > 0 ? gates.elements / (routes.tokens * routes.experts) : 0;
  routes.capacity = slots.shape[sr - 2];
  routes.width = slots.shape[sr - 1];
  return routes;
}

// q [b, h, s, d], k [b, hkv, t, d], v [b, hkv, t, e]; a shard of q (the
// sequence split, k and v gathered) starts at its offset in the sequence,
// which is the keys' last rows.
cuda::AttentionShape attention_shape(const reference::DeviceContext& ctx, const ir::AttrReader& attrs,
                                     const CudaValue& q, const CudaValue& k, const CudaValue& v) {
  cuda::AttentionShape a{};
  a.bh = q.shape[0] * q.shape[1];
  a.s = q.shape[2];
  a.d = q.shape[3];
  a.t = k.shape[2];
  a.e = v.shape[3];
  a.group = q.shape[1] / k.shape[1];
  a.first_query = reference::first_query(ctx, q.shape, k.shape[2]);
  a.causal = attrs.boolean("causal");
  double scale = attrs.real("scale");
  a.scale = static_cast<float>(scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(a.d)));
  return a;
}

// A convolution of input x by weights w into y (NCHW), as the reference's.
cuda::ConvShape conv_shape(const CudaValue& x, const CudaValue& w, const CudaValue& y, const ir::AttrReader& attrs) {
  const reference::kernels::Conv2dParams p = reference::conv_params(attrs);
  cuda::ConvShape c{x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[2],
                    w.shape[3], y.shape[2], y.shape[3], p.groups,   {},         {}};
  for (int i = 0; i < 2; ++i) {
    c.stride[i] = p.stride[i];
    c.padding[i] = p.padding[i];
  }
  return c;
}

// Batch norm's view of x [outer, channels, inner..]; with `counted`, the
// elements its per-channel sums cover (the `count` attribute) and eps.
cuda::BatchNormShape batchnorm_shape(const CudaValue& x, const ir::AttrReader& attrs, bool counted) {
  const int64_t outer = x.shape[0], channels = x.shape[1];
  cuda::BatchNormShape b{outer, channels, x.elements / std::max<int64_t>(outer * channels, 1), 0.0f, 0.0f};
  if (counted) {
    b.count = static_cast<float>(attrs.integer("count"));
    b.eps = static_cast<float>(attrs.real("eps"));
  }
  return b;
}

// A pooling of x into y (NCHW).
cuda::PoolShape pool_shape(const CudaValue& x, const CudaValue& y, const ir::AttrReader& attrs) {
  const reference::kernels::PoolParams p = reference::pool_params(attrs);
  cuda::PoolShape s{x.shape[0] * x.shape[1], x.shape[2], x.shape[3], y.shape[2], y.shape[3], {}, {}, {}};
  for (int i = 0; i < 2; ++i) {
    s.kernel[i] = p.kernel[i];
    s.stride[i] = p.stride[i];
    s.padding[i] = p.padding[i];
  }
  return s;
}

class CudaDevice;

// One op's launch: its operands x, results y (y[0] of n elements).
struct CudaCall {
  const reference::DeviceContext& ctx;
  const ir::AttrReader& attrs;
  const std::vector<const CudaValue*>& x;
  const std::vector<CudaValue*>& y;
  int64_t n;
  float real(std::string_view name) const { return static_cast<float>(attrs.real(name)); }
};

using CudaKernel = cudaError_t (*)(CudaDevice& self, const CudaCall& call);
// Why an op is beyond its kernel (an einsum of three operands), or "".
using CudaKernelLimit = std::string (*)(const ir::Module& module, const ir::Function& f, const ir::Op& op);

struct CudaKernelEntry {
  CudaKernel launch = nullptr;
  CudaKernelLimit limit = nullptr;
  bool shares_operand = false;  // the result is the operand's floats: no kernel runs
};

// The ops the device runs, each bound once: cannot_run and compute both
// read it, so an op is refused before a step exactly when it has no kernel.
class CudaKernelTable {
 public:
  void bind(OpKind kind, CudaKernel launch, CudaKernelLimit limit = nullptr) {
    CudaKernelEntry& e = slot(kind);
    e.launch = launch;
    e.limit = limit;
  }
  void share_operand(OpKind kind) { slot(kind).shares_operand = true; }
  const CudaKernelEntry& find(OpKind kind) const { return entries_[static_cast<size_t>(kind)]; }

 private:
  CudaKernelEntry& slot(OpKind kind) {
    CudaKernelEntry& e = entries_[static_cast<size_t>(kind)];
    if (e.launch || e.shares_operand)
      throw std::logic_error(fmt::format("CUDA kernel for {} bound twice", ir::op_name(kind)));
    return e;
  }
  std::array<CudaKernelEntry, ir::kOpKindCount> entries_{};
};

class CudaDevice final : public Device {
 public:
  CudaDevice(int gpu, GemmPrecision gemms) : gpu_(gpu), gemm_precision_(gemms) {
    check(cudaSetDevice(gpu_), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Keep freed memory in the pool: later steps allocate nothing new.
    cudaMemPool_t pool;
    check(cudaDeviceGetDefaultMemPool(&pool, gpu_), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, gpu_), "cudaGetDeviceProperties");
    name_ = fmt::format("cuda ({}, GPU {}{})", prop.name, gpu_,
                        gemms == GemmPrecision::TF32   ? ", TF32 GEMMs"
                        : gemms == GemmPrecision::BF16 ? ", bf16 GEMMs"
                                                       : "");
    check(cudaMalloc(&flag_, sizeof(int)), "cudaMalloc");
    check(cudaMalloc(&workspace_, kWorkspaceBytes), "cudaMalloc");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
  }
  ~CudaDevice() override {
    cudaStreamSynchronize(stream_);
    gemm_calls_.clear();
    cublasLtDestroy(lt_);
    cudaFree(workspace_);
    cudaFree(flag_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }

  std::string cannot_run(const ir::Module& module, const ir::Function& f, const ir::Op& op) const override {
    const CudaKernelEntry& kernel = kernels().find(op.kind);
    if (!kernel.launch && !kernel.shares_operand)
      return fmt::format("{} has no CUDA kernel yet (docs/run.md lists the ops that have)", ir::op_name(op.kind));
    return kernel.limit ? kernel.limit(module, f, op) : std::string();
  }

  std::unique_ptr<DeviceValue> upload(const reference::HostTensor& t) override {
    auto v = std::make_unique<CudaValue>(t.shape, t.dtype, stream_);
    std::vector<float> host(t.data.begin(), t.data.end());
    if (v->elements > 0)
      check(cudaMemcpyAsync(v->data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, stream_),
            "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");  // `host` goes out of scope
    return v;
  }

  reference::HostTensor download(const DeviceValue& value) override {
    const CudaValue& v = cuda_value(value);
    std::vector<float> host(static_cast<size_t>(v.elements));
    if (v.elements > 0)
      check(cudaMemcpyAsync(host.data(), v.data, host.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    reference::HostTensor t(v.dtype, v.shape);
    std::copy(host.begin(), host.end(), t.data.begin());
    return t;
  }

  std::string compute(const reference::DeviceContext& ctx, std::span<const DeviceValue* const> in,
                      std::vector<std::unique_ptr<DeviceValue>>& out) override {
    std::vector<const CudaValue*> x;
    for (const DeviceValue* v : in) x.push_back(&cuda_value(*v));
    out.clear();
    if (kernels().find(ctx.op.kind).shares_operand) {
      const ir::TensorType& type = ctx.module.value_type(ctx.function, ctx.function.result(ctx.op, 0));
      out.push_back(std::make_unique<CudaValue>(std::vector<int64_t>(type.shape().begin(), type.shape().end()),
                                                type.dtype, *x[0]));
      return {};
    }
    std::vector<CudaValue*> y;
    for (int i = 0; i < ctx.op.result_count; ++i) {
      const ir::TensorType& type = ctx.module.value_type(ctx.function, ctx.function.result(ctx.op, i));
      auto v = std::make_unique<CudaValue>(std::vector<int64_t>(type.shape().begin(), type.shape().end()), type.dtype,
                                           stream_);
      y.push_back(v.get());
      out.push_back(std::move(v));
    }
    cudaError_t status = launch(ctx, x, y);
    if (status != cudaSuccess) return fmt::format("CUDA: {}", cudaGetErrorString(status));
    if (ctx.op.kind == OpKind::CrossEntropy || ctx.op.kind == OpKind::CrossEntropyGrad) {
      int bad = 0;
      check(cudaMemcpyAsync(&bad, flag_, sizeof(int), cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      if (bad) return "a label is outside the logits' classes";
    }
    return {};
  }

  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  // Launches op `kind`'s kernel; its table entry says it has one.
  cudaError_t launch(const reference::DeviceContext& ctx, const std::vector<const CudaValue*>& x,
                     const std::vector<CudaValue*>& y) {
    ir::AttrReader attrs(ctx.module, ctx.function, ctx.op);
    return kernels().find(ctx.op.kind).launch(*this, {ctx, attrs, x, y, y[0]->elements});
  }

  cudaError_t binary(const CudaCall& call, cuda::BinaryOp op) {
    return cuda::binary(op, call.x[0]->data, call.x[1]->data, call.y[0]->data, call.n, call.x[1]->elements, stream_);
  }

  // Every op's kernel, bound once (kernels() below).
  static const CudaKernelTable& kernels();

  cudaError_t clear_flag() { return cudaMemsetAsync(flag_, 0, sizeof(int), stream_); }

  // y = op(L) · op(R) as `p` says, on cuBLASLt; nullopt when it has no
  // algorithm for the plan (the caller's own kernel runs it instead).
  std::optional<cudaError_t> gemm(const ir::GemmPlan& p, const float* l, const float* r, float* y) {
    const GemmCall* call = gemm_call(p);
    if (!call) return std::nullopt;
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s = cublasLtMatmul(lt_, call->desc, &one, r, call->a, l, call->b, &zero, y, call->c, y, call->c,
                                      &call->algo, workspace_, kWorkspaceBytes, stream_);
    return s == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
  }

  // The keys (or values) a step attends over: positions from `first` of
  // the cache's `context` (the cache [.., capacity, d] holds them from
  // its slot 0), then the step's own [.., t, d], at most `capacity`.
  CudaValue held_positions(const CudaValue& cache, int64_t first, int64_t context, const CudaValue& step) {
    const size_t rank = step.shape.size();
    const int64_t t = step.shape[rank - 2], d = step.shape[rank - 1], capacity = cache.shape[rank - 2];
    const int64_t held = std::clamp<int64_t>(context + t - first, 0, capacity);
    const int64_t rows = step.elements / std::max<int64_t>(t * d, 1);
    std::vector<int64_t> shape = step.shape;
    shape[rank - 2] = held;
    CudaValue out(shape, step.dtype, stream_);
    const int64_t from_cache = std::clamp<int64_t>(context - first, 0, held);
    if (from_cache > 0)
      check(cuda::copy_rows(cache.data, out.data, rows, capacity, 0, held, 0, from_cache, d, stream_), "copy_rows");
    if (held > from_cache)
      check(cuda::copy_rows(step.data, out.data, rows, t, first + from_cache - context, held, from_cache,
                            held - from_cache, d, stream_),
            "copy_rows");
    return out;
  }

  // Attention as batched GEMMs: a k/v head's query heads are one matrix of
  // group·s rows (q [b, h, s, d] is [b·hkv, group·s, d]), so the scores
  // S = Q·Kᵀ, the masked softmax P and O = P·V are three calls; nullopt
  // when cuBLASLt cannot take them.
  std::optional<cudaError_t> attention_on_gemms(const cuda::AttentionShape& a, const CudaValue& q, const CudaValue& k,
                                                const CudaValue& v, CudaValue& out) {
    const int64_t heads = a.bh / a.group, rows = a.group * a.s;
    CudaValue p({heads * rows * a.t}, ir::DType::F32, stream_);
    std::optional<cudaError_t> done = gemm({heads, rows, a.t, a.d, false, false, true}, q.data, k.data, p.data);
    if (!done || *done != cudaSuccess) return done;
    if (cudaError_t e = cuda::attention_softmax(p.data, heads * rows, a, stream_); e != cudaSuccess) return e;
    return gemm({heads, rows, a.e, a.t, false, false, false}, p.data, v.data, out.data);
  }

  // Its gradient: P again, then dV = Pᵀ·dO, dP = dO·Vᵀ, dS from the
  // softmax's gradient, dQ = dS·K, dK = dSᵀ·Q.
  std::optional<cudaError_t> attention_grad_on_gemms(const cuda::AttentionShape& a, const CudaValue& dout,
                                                     const CudaValue& q, const CudaValue& k, const CudaValue& v,
                                                     CudaValue& dq, CudaValue& dk, CudaValue& dv) {
    const int64_t heads = a.bh / a.group, rows = a.group * a.s;
    CudaValue p({heads * rows * a.t}, ir::DType::F32, stream_), ds({heads * rows * a.t}, ir::DType::F32, stream_);
    auto failed = [](const std::optional<cudaError_t>& d) { return !d || *d != cudaSuccess; };
    std::optional<cudaError_t> done = gemm({heads, rows, a.t, a.d, false, false, true}, q.data, k.data, p.data);
    if (failed(done)) return done;
    if (cudaError_t e = cuda::attention_softmax(p.data, heads * rows, a, stream_); e != cudaSuccess) return e;
    if (done = gemm({heads, a.t, a.e, rows, false, true, false}, p.data, dout.data, dv.data); failed(done)) return done;
    if (done = gemm({heads, rows, a.t, a.e, false, false, true}, dout.data, v.data, ds.data); failed(done)) return done;
    if (cudaError_t e = cuda::attention_softmax_grad(p.data, ds.data, heads * rows, a, stream_); e != cudaSuccess)
      return e;
    if (done = gemm({heads, rows, a.d, a.t, false, false, false}, ds.data, k.data, dq.data); failed(done)) return done;
    return gemm({heads, a.t, a.d, rows, false, true, false}, ds.data, q.data, dk.data);
  }

  // The cuBLASLt call of a plan, made on first use; nullptr when cuBLASLt
  // has no algorithm for it (the einsum kernel runs it instead).
  const GemmCall* gemm_call(const ir::GemmPlan& p) {
    auto key = std::make_tuple(p.batch, p.m, p.n, p.k, p.transpose_l, p.transpose_r);
    auto it = gemm_calls_.find(key);
    if (it == gemm_calls_.end()) it = gemm_calls_.emplace(key, make_gemm_call(lt_, p, gemm_precision_)).first;
    return it->second.get();
  }

  int gpu_;
  GemmPrecision gemm_precision_;
  cudaStream_t stream_ = nullptr;
  int* flag_ = nullptr;  // set by a kernel that meets a label outside the classes
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool>, std::unique_ptr<GemmCall>> gemm_calls_;
  std::string name_;
};

const CudaKernelTable& CudaDevice::kernels() {
  static const CudaKernelTable table = [] {
    CudaKernelTable t;
    for (const ir::PointwiseOp& p : ir::pointwise_ops()) {
      const CudaKernel activation = [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
        const auto& [ctx, attrs, x, y, n] = call;
        const int row = activation_row(ctx.op.kind);
        if (ir::pointwise_ops()[static_cast<size_t>(row)].kind == ctx.op.kind)
          return cuda::pointwise_forward(row, x[0]->data, y[0]->data, n, self.stream_);
        return cuda::pointwise_backward(row, x[0]->data, x[1]->data, y[0]->data, n, self.stream_);
      };
      t.bind(p.kind, activation);
      t.bind(p.grad, activation);
    }
    // f32 storage holds every float dtype alike: the result is the operand's floats.
    t.share_operand(OpKind::Cast);
    t.share_operand(OpKind::Reshape);
    t.bind(OpKind::Fill, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::fill(y[0]->data, n, call.real("value"), self.stream_);
    });
    t.bind(OpKind::Scale, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::scale(x[0]->data, y[0]->data, n, call.real("factor"), self.stream_);
    });
    const CudaKernel kAdd = [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      return self.binary(call, cuda::BinaryOp::Add);
    };
    t.bind(OpKind::Add, kAdd);
    t.bind(OpKind::Accumulate, kAdd);
    t.bind(OpKind::Sub, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      return self.binary(call, cuda::BinaryOp::Sub);
    });
    t.bind(OpKind::Mul, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      return self.binary(call, cuda::BinaryOp::Mul);
    });
    t.bind(OpKind::Div, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      return self.binary(call, cuda::BinaryOp::Div);
    });
    t.bind(OpKind::Maximum, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      return self.binary(call, cuda::BinaryOp::Max);
    });
    t.bind(OpKind::Partialize, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      // The value on coordinate 0 of the axis, zeros elsewhere: the sum
      // over the axis is the value.
      const int axis = static_cast<int>(attrs.integer("axis"));
      if (ctx.module.mesh().coord(ctx.rank, axis) != 0) return cuda::fill(y[0]->data, n, 0.0f, self.stream_);
      return n > 0 ? cudaMemcpyAsync(y[0]->data, x[0]->data, static_cast<size_t>(n) * sizeof(float),
                                     cudaMemcpyDeviceToDevice, self.stream_)
                   : cudaSuccess;
    });
    t.bind(OpKind::Slice, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int dim = normalized(attrs.integer("dim"), static_cast<int>(x[0]->shape.size()));
      const Blocks b = blocks_along(x[0]->shape, dim);
      const int64_t m = y[0]->shape[static_cast<size_t>(dim)];
      return cuda::copy_rows(x[0]->data, y[0]->data, b.outer, b.n, attrs.integer("start"), m, 0, m, b.inner,
                             self.stream_);
    });
    t.bind(OpKind::Concat, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int dim = normalized(attrs.integer("dim"), static_cast<int>(x[0]->shape.size()));
      const int64_t m = y[0]->shape[static_cast<size_t>(dim)];
      int64_t offset = 0;
      for (const CudaValue* part : x) {
        const Blocks b = blocks_along(part->shape, dim);
        if (cudaError_t e =
                cuda::copy_rows(part->data, y[0]->data, b.outer, b.n, 0, m, offset, b.n, b.inner, self.stream_);
            e != cudaSuccess)
          return e;
        offset += b.n;
      }
      return cudaSuccess;
    });
    t.bind(OpKind::LayerNorm, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Rows r = rows_of(*x[0]);
      return cuda::layernorm(x[0]->data, x[1]->data, x[2]->data, y[0]->data, r.rows, r.h, call.real("eps"),
                             self.stream_);
    });
    t.bind(OpKind::LayerNormGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Rows r = rows_of(*x[1]);
      return cuda::layernorm_grad(x[0]->data, x[1]->data, x[2]->data, y[0]->data, r.rows, r.h, call.real("eps"),
                                  self.stream_);
    });
    t.bind(OpKind::LayerNormWeightGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Rows r = rows_of(*x[1]);
      CudaValue stats({2 * r.rows}, ir::DType::F32, self.stream_);
      return cuda::layernorm_weight_grad(x[0]->data, x[1]->data, y[0]->data, y[1]->data, stats.data, r.rows, r.h,
                                         call.real("eps"), self.stream_);
    });
    t.bind(OpKind::Embedding, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::embedding(x[0]->data, x[1]->data, y[0]->data, x[1]->elements, x[0]->shape[0], x[0]->shape[1],
                             first_row(ctx, attrs, x[0]->shape[0]), self.stream_);
    });
    t.bind(OpKind::EmbeddingGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::embedding_grad(x[0]->data, x[1]->data, y[0]->data, x[1]->elements, y[0]->shape[0], y[0]->shape[1],
                                  first_row(ctx, attrs, attrs.integer("vocab")), self.stream_);
    });
    t.bind(OpKind::CrossEntropy, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int64_t rows = x[1]->elements, c = x[0]->shape.back();
      CudaValue losses({rows}, ir::DType::F32, self.stream_);
      if (cudaError_t e = self.clear_flag(); e != cudaSuccess) return e;
      if (cudaError_t e =
              cuda::cross_entropy_rows(x[0]->data, x[1]->data, losses.data, self.flag_, rows, c, self.stream_);
          e != cudaSuccess)
        return e;
      cuda::ReduceShape all{};
      all.reduced = 1;
      all.reduced_size[0] = rows;
      all.reduced_stride[0] = 1;
      if (cudaError_t e = cuda::sum(losses.data, y[0]->data, 1, all, self.stream_); e != cudaSuccess) return e;
      if (attrs.string("reduction") == "mean" && rows > 0)
        if (cudaError_t e = cuda::scale(y[0]->data, y[0]->data, 1, 1.0f / static_cast<float>(rows), self.stream_);
            e != cudaSuccess)
          return e;
      return cudaSuccess;
    });
    t.bind(OpKind::CrossEntropyGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int64_t rows = x[2]->elements, c = x[1]->shape.back();
      const float divisor = attrs.string("reduction") == "mean" && rows > 0 ? static_cast<float>(rows) : 1.0f;
      if (cudaError_t e = self.clear_flag(); e != cudaSuccess) return e;
      return cuda::cross_entropy_grad(x[0]->data, x[1]->data, x[2]->data, y[0]->data, self.flag_, rows, c, divisor,
                                      self.stream_);
    });
    t.bind(OpKind::Attention, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      // A KV cache: its first `context` positions precede the step's k
      // and v. Without any (a prefill), it is only written.
      const int64_t context = attrs.integer("context");
      const bool cached = x.size() > 3 && context > 0;
      std::optional<CudaValue> keys, values;
      if (cached) {
        keys.emplace(self.held_positions(*x[3], 0, context, *x[1]));
        values.emplace(self.held_positions(*x[4], 0, context, *x[2]));
      }
      const CudaValue& k = cached ? *keys : *x[1];
      const CudaValue& v = cached ? *values : *x[2];
      const cuda::AttentionShape a = attention_shape(ctx, attrs, *x[0], k, v);
      if (std::optional<cudaError_t> done = self.attention_on_gemms(a, *x[0], k, v, *y[0])) return *done;
      return cuda::attention(x[0]->data, k.data, v.data, y[0]->data, nullptr, a, self.stream_);
    });
    t.bind(OpKind::AttentionPart, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      // This shard's run of positions starts at the cache's offset; q's
      // first row is at the context plus its own offset in the step.
      const int64_t context = attrs.integer("context");
      const int64_t first = operand_placement(ctx, 3, x[3]->shape).offset[2];
      const reference::DevicePlacement queries = operand_placement(ctx, 0, x[0]->shape);
      const CudaValue keys = self.held_positions(*x[3], first, context, *x[1]);
      const CudaValue values = self.held_positions(*x[4], first, context, *x[2]);
      cuda::AttentionShape a = attention_shape(ctx, attrs, *x[0], keys, values);
      a.first_query = context + x[1]->shape[2] - queries.logical_shape[2] + queries.offset[2] - first;
      return cuda::attention(x[0]->data, keys.data, values.data, y[0]->data, y[1]->data, a, self.stream_);
    });
    t.bind(OpKind::Conv2d, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::conv2d(x[0]->data, x[1]->data, y[0]->data, conv_shape(*x[0], *x[1], *y[0], attrs), self.stream_);
    });
    t.bind(OpKind::Conv2dInputGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::conv2d_input_grad(x[0]->data, x[2]->data, y[0]->data, conv_shape(*y[0], *x[2], *x[0], attrs),
                                     self.stream_);
    });
    t.bind(OpKind::Conv2dWeightGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::conv2d_weight_grad(x[0]->data, x[1]->data, y[0]->data, conv_shape(*x[1], *y[0], *x[0], attrs),
                                      self.stream_);
    });
    t.bind(OpKind::MaxPool2d, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::max_pool2d(x[0]->data, y[0]->data, pool_shape(*x[0], *y[0], attrs), self.stream_);
    });
    t.bind(OpKind::MaxPool2dGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::max_pool2d_grad(x[0]->data, x[1]->data, y[0]->data, pool_shape(*y[0], *x[0], attrs), self.stream_);
    });
    t.bind(OpKind::AvgPool2d, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::avg_pool2d(x[0]->data, y[0]->data, pool_shape(*x[0], *y[0], attrs), self.stream_);
    });
    t.bind(OpKind::AvgPool2dGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::avg_pool2d_grad(x[0]->data, y[0]->data, pool_shape(*y[0], *x[0], attrs), self.stream_);
    });
    t.bind(OpKind::BatchNormStats, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::batchnorm_stats(x[0]->data, y[0]->data, y[1]->data, batchnorm_shape(*x[0], attrs, false),
                                   self.stream_);
    });
    t.bind(OpKind::BatchNormApply, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::batchnorm_apply(x[0]->data, x[1]->data, x[2]->data, x[3]->data, x[4]->data, y[0]->data,
                                   batchnorm_shape(*x[0], attrs, true), self.stream_);
    });
    t.bind(OpKind::BatchNormWeightGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::batchnorm_weight_grad(x[0]->data, x[1]->data, x[2]->data, x[3]->data, y[0]->data, y[1]->data,
                                         batchnorm_shape(*x[1], attrs, true), self.stream_);
    });
    t.bind(OpKind::BatchNormInputGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::batchnorm_input_grad(x[0]->data, x[1]->data, x[2]->data, x[3]->data, x[4]->data, x[5]->data,
                                        x[6]->data, y[0]->data, batchnorm_shape(*x[1], attrs, true), self.stream_);
    });
    t.bind(OpKind::AttentionMerge, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int64_t parts = x[0]->shape[0], dv = x[0]->shape.back();
      return cuda::attention_merge(x[0]->data, x[1]->data, y[0]->data, parts, x[1]->elements / parts, dv, self.stream_);
    });
    t.bind(OpKind::AttentionGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const cuda::AttentionShape a = attention_shape(ctx, attrs, *x[1], *x[2], *x[3]);
      if (std::optional<cudaError_t> done =
              self.attention_grad_on_gemms(a, *x[0], *x[1], *x[2], *x[3], *y[0], *y[1], *y[2]))
        return *done;
      return cuda::attention_grad(x[0]->data, x[1]->data, x[2]->data, x[3]->data, y[0]->data, y[1]->data, y[2]->data, a,
                                  self.stream_);
    });
    t.bind(OpKind::ReduceMax, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::reduce_max(x[0]->data, y[0]->data, n, reduce_shape(x[0]->shape, attrs.ints("dims")), self.stream_);
    });
    t.bind(OpKind::Expand, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::gather_strided(x[0]->data, y[0]->data, n, reduced_strides(y[0]->shape, attrs.ints("dims")),
                                  self.stream_);
    });
    t.bind(OpKind::ReduceMaxGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::reduce_max_grad(x[0]->data, x[1]->data, x[2]->data, y[0]->data, n,
                                   reduced_strides(x[1]->shape, attrs.ints("dims")), self.stream_);
    });
    t.bind(OpKind::Transpose, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::gather_strided(x[0]->data, y[0]->data, n, transposed(x[0]->shape, attrs.ints("perm")), self.stream_);
    });
    t.bind(OpKind::Exp, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::unary(cuda::UnaryOp::Exp, x[0]->data, y[0]->data, n, self.stream_);
    });
    t.bind(OpKind::Sqrt, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::unary(cuda::UnaryOp::Sqrt, x[0]->data, y[0]->data, n, self.stream_);
    });
    const CudaKernel kSoftmax = [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Blocks b = blocks_along(x[0]->shape, normalized(attrs.integer("dim"), rank_of(*x[0])));
      return cuda::softmax(x[0]->data, y[0]->data, b.outer, b.n, b.inner, ctx.op.kind == OpKind::LogSoftmax,
                           self.stream_);
    };
    t.bind(OpKind::Softmax, kSoftmax);
    t.bind(OpKind::LogSoftmax, kSoftmax);
    const CudaKernel kSoftmaxGrad = [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Blocks b = blocks_along(x[1]->shape, normalized(attrs.integer("dim"), rank_of(*x[1])));
      return cuda::softmax_grad(x[0]->data, x[1]->data, y[0]->data, b.outer, b.n, b.inner,
                                ctx.op.kind == OpKind::LogSoftmaxGrad, self.stream_);
    };
    t.bind(OpKind::SoftmaxGrad, kSoftmaxGrad);
    t.bind(OpKind::LogSoftmaxGrad, kSoftmaxGrad);
    t.bind(OpKind::RmsNorm, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Rows r = rows_of(*x[0]);
      return cuda::rms_norm(x[0]->data, x.size() > 1 ? x[1]->data : nullptr, y[0]->data, r.rows, r.h, call.real("eps"),
                            self.stream_);
    });
    t.bind(OpKind::RmsNormGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Rows r = rows_of(*x[1]);
      return cuda::rms_norm_grad(x[0]->data, x[1]->data, x.size() > 2 ? x[2]->data : nullptr, y[0]->data, r.rows, r.h,
                                 call.real("eps"), self.stream_);
    });
    t.bind(OpKind::RmsNormWeightGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const Rows r = rows_of(*x[1]);
      CudaValue inverse({r.rows}, ir::DType::F32, self.stream_);
      return cuda::rms_norm_weight_grad(x[0]->data, x[1]->data, y[0]->data, inverse.data, r.rows, r.h, call.real("eps"),
                                        self.stream_);
    });
    t.bind(OpKind::Rope, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      // Positions are logical: a shard of the sequence starts at its offset.
      const int dim = normalized(attrs.integer("dim"), rank_of(*x[0]));
      const int64_t d = x[0]->shape.back();
      const Blocks b = blocks_along(x[0]->shape, dim);
      const int64_t first =
          attrs.integer("offset") + result_placement(ctx, y[0]->shape).offset[static_cast<size_t>(dim)];
      return cuda::rope(x[0]->data, y[0]->data, d > 0 ? n / d : 0, d, b.inner, b.n, first, call.real("base"),
                        attrs.boolean("inverse") ? -1.0f : 1.0f, self.stream_);
    });
    t.bind(OpKind::CrossEntropyParts, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int64_t rows = x[2]->elements, c = x[0]->shape.back();
      return cuda::cross_entropy_parts(x[0]->data, x[1]->data, x[2]->data, y[0]->data, y[1]->data, rows, c,
                                       first_class(operand_placement(ctx, 0, x[0]->shape)), self.stream_);
    });
    t.bind(OpKind::CrossEntropyTotal, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      CudaValue terms({x[0]->elements}, ir::DType::F32, self.stream_);
      return cuda::cross_entropy_total(x[0]->data, x[1]->data, y[0]->data, terms.data, x[0]->elements, self.stream_);
    });
    t.bind(OpKind::CrossEntropyPartsGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int64_t rows = x[4]->elements, c = x[1]->shape.back();
      return cuda::cross_entropy_parts_grad(x[0]->data, x[1]->data, x[2]->data, x[3]->data, x[4]->data, y[0]->data,
                                            rows, c, first_class(result_placement(ctx, y[0]->shape)), self.stream_);
    });
    t.bind(OpKind::Dropout, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      reference::DevicePlacement where = reference::dropout_placement(ctx, y[0]->shape);
      cuda::DropoutPlace place{};
      place.dims = rank_of(*x[0]);
      std::vector<int64_t> strides = row_major_strides(where.logical_shape);
      for (int d = 0; d < place.dims; ++d) {
        place.size[d] = x[0]->shape[static_cast<size_t>(d)];
        place.offset[d] = where.offset[static_cast<size_t>(d)];
        place.logical_stride[d] = strides[static_cast<size_t>(d)];
      }
      return cuda::dropout(x[0]->data, y[0]->data, y[1]->data, n, place, attrs.real("p"),
                           static_cast<uint64_t>(attrs.integer("seed")), self.stream_);
    });
    t.bind(OpKind::DropoutGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      if (cudaError_t e = self.binary(call, cuda::BinaryOp::Mul); e != cudaSuccess) return e;
      return cuda::scale(y[0]->data, y[0]->data, n, 1.0f / (1.0f - call.real("p")), self.stream_);
    });
    const CudaKernel kTopK = [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const bool grad = ctx.op.kind == OpKind::TopKGrad;
      const CudaValue& scores = *x[grad ? 1 : 0];
      const Blocks b = blocks_along(scores.shape, normalized(attrs.integer("dim"), rank_of(scores)));
      return cuda::top_k(scores.data, grad ? x[0]->data : nullptr, y[0]->data, b.outer, b.n, b.inner,
                         attrs.integer("k"), attrs.integer("groups"), attrs.integer("group_k"), self.stream_);
    };
    const CudaKernelLimit top_k_groups = [](const ir::Module& module, const ir::Function& f, const ir::Op& op) {
      if (ir::AttrReader(module, f, op).integer("groups") > cuda::kMaxTopKGroups)
        return fmt::format("top_k over more than {} groups has no CUDA kernel yet", cuda::kMaxTopKGroups);
      return std::string();
    };
    t.bind(OpKind::TopK, kTopK, top_k_groups);
    t.bind(OpKind::TopKGrad, kTopK, top_k_groups);
    t.bind(OpKind::CountNonzero, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::count_nonzero(x[0]->data, y[0]->data, n, reduce_shape(x[0]->shape, attrs.ints("dims")),
                                 self.stream_);
    });
    t.bind(OpKind::Dispatch, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::dispatch(x[0]->data, x[1]->data, y[0]->data, routes(*x[1], *y[0]), attrs.boolean("weighted"),
                            self.stream_);
    });
    t.bind(OpKind::Combine, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::combine(x[0]->data, x[1]->data, y[0]->data, routes(*x[1], *x[0]), attrs.boolean("weighted"),
                           self.stream_);
    });
    t.bind(OpKind::CombineGateGrad, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::combine_gate_grad(x[0]->data, x[1]->data, x[2]->data, y[0]->data, routes(*x[2], *x[1]),
                                     self.stream_);
    });
    t.bind(OpKind::Shard, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int64_t index = ctx.module.mesh().coord(ctx.rank, static_cast<int>(attrs.integer("axis")));
      if (attrs.boolean("flat")) {
        // Chunk `index` of the flattened tensor, the last one padded with zeros.
        const int64_t begin = std::min(index * n, x[0]->elements), copied = std::min(n, x[0]->elements - begin);
        if (cudaError_t e = cudaMemsetAsync(y[0]->data, 0, static_cast<size_t>(n) * sizeof(float), self.stream_);
            e != cudaSuccess)
          return e;
        return copied > 0 ? cudaMemcpyAsync(y[0]->data, x[0]->data + begin, static_cast<size_t>(copied) * sizeof(float),
                                            cudaMemcpyDeviceToDevice, self.stream_)
                          : cudaSuccess;
      }
      const int dim = normalized(attrs.integer("dim"), rank_of(*x[0]));
      const Blocks b = blocks_along(x[0]->shape, dim);
      const int64_t m = b.n / attrs.integer("parts");
      return cuda::copy_rows(x[0]->data, y[0]->data, b.outer, b.n, index * m, m, 0, m, b.inner, self.stream_);
    });
    t.bind(OpKind::Unshard, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const int64_t index = ctx.module.mesh().coord(ctx.rank, static_cast<int>(attrs.integer("axis")));
      const int dim = normalized(attrs.integer("dim"), rank_of(*x[0]));
      const Blocks b = blocks_along(x[0]->shape, dim);
      if (cudaError_t e = cuda::fill(y[0]->data, n, 0.0f, self.stream_); e != cudaSuccess) return e;
      return cuda::copy_rows(x[0]->data, y[0]->data, b.outer, b.n, 0, y[0]->shape[static_cast<size_t>(dim)],
                             index * b.n, b.n, b.inner, self.stream_);
    });
    t.bind(OpKind::Sum, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::sum(x[0]->data, y[0]->data, n, reduce_shape(x[0]->shape, attrs.ints("dims")), self.stream_);
    });
    const CudaKernelLimit two_operands = [](const ir::Module&, const ir::Function& f, const ir::Op& op) {
      return f.operands(op).size() > 2 ? std::string("an einsum of more than two operands has no CUDA kernel yet")
                                       : std::string();
    };
    t.bind(
        OpKind::Einsum,
        [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
          const auto& [ctx, attrs, x, y, n] = call;
          if (x.size() == 2)
            if (std::optional<ir::GemmPlan> plan = ir::plan_gemm(attrs.string("spec"), x[0]->shape, x[1]->shape))
              if (std::optional<cudaError_t> done =
                      self.gemm(*plan, x[plan->swapped ? 1 : 0]->data, x[plan->swapped ? 0 : 1]->data, y[0]->data))
                return *done;
          std::optional<cuda::EinsumShape> shape = einsum_shape(attrs.string("spec"), x);
          if (!shape) return cudaErrorInvalidValue;
          return cuda::einsum(x[0]->data, x.size() > 1 ? x[1]->data : nullptr, y[0]->data, n, *shape, self.stream_);
        },
        two_operands);
    t.bind(OpKind::Sgd, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      return cuda::sgd(x[0]->data, x[1]->data, y[0]->data, n, call.real("lr"), call.real("weight_decay"), self.stream_);
    });
    t.bind(OpKind::Adam, [](CudaDevice& self, const CudaCall& call) -> cudaError_t {
      const auto& [ctx, attrs, x, y, n] = call;
      const double step = static_cast<double>(attrs.integer("step") + ctx.steps_before);
      cuda::AdamStep p{call.real("lr"),
                       call.real("beta1"),
                       call.real("beta2"),
                       call.real("eps"),
                       call.real("weight_decay"),
                       static_cast<float>(1 - std::pow(attrs.real("beta1"), step)),
                       static_cast<float>(1 - std::pow(attrs.real("beta2"), step))};
      return cuda::adam(x[0]->data, x[1]->data, x[2]->data, x[3]->data, y[0]->data, y[1]->data, y[2]->data, n, p,
                        self.stream_);
    });
    return t;
  }();
  return table;
}

}  // namespace

std::unique_ptr<Device> open_cuda_device(int32_t local_rank, GemmPrecision gemms, std::string& why_not) {
  int count = 0;
  if (cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess || count == 0) {
    why_not = status != cudaSuccess ? fmt::format("no usable CUDA device: {}", cudaGetErrorString(status))
                                    : "no CUDA device found";
    return nullptr;
  }
  try {
    return std::make_unique<CudaDevice>(local_rank % count, gemms);
  } catch (const CudaError& e) {
    why_not = e.what();
    return nullptr;
  }
}

}  // namespace dstc::runtime
