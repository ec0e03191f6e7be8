// What a communication kernel holding SMs does to the compute beside it
// (docs/simulator.md, "Comp-comm overlap"): NCCL runs one CTA per channel,
// DeepEP 20, and those SMs are not the GEMM's while they run. On one GPU a
// stand-in kernel holds k SMs (one 512-thread CTA on each, as NCCL's, with
// the shared memory given) for a fixed time, either idling or streaming
// memory as a collective does, while a victim runs N times on another
// stream: a bf16 cuBLASLt GEMM (with and without
// CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = SMs - k, Transformer Engine's
// `sm_margin`) or a streaming add. Prints one line per case: the victim's
// time per run beside it against alone, the simulator's ratio SMs / (SMs -
// k), whether the victim finished only after the holder (a kernel waiting
// for the held SMs), and the holder's bandwidth. `sweep` instead prints each
// GEMM's cuBLASLt configuration (tile, cluster shape) and its time beside
// an idle holder of every k from 0 to 40, then beside holders lasting a
// quarter and a half of a run of GEMMs (what a shorter collective costs).
// `placement` prints how clusters fit the GPU, the SMs a holder's CTAs
// land on, and the GEMMs beside holders launched as pairs of SMs.
// Usage: dstc_comm_sm_contention [sweep | placement]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "%s: cuBLAS status %d\n", what, static_cast<int>(s));
  std::exit(1);
}

// One CTA per held SM: signals it is resident, then for `cycles` either
// polls (an idle channel) or copies its slice of src to dst over and over
// (a channel moving data), counting the bytes read and written.
__global__ void hold_sms(bool stream_memory, long long cycles, volatile int* resident, const float4* src, float4* dst,
                         size_t per_block, unsigned long long* moved) {
  extern __shared__ float4 staging[];
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    resident[blockIdx.x] = 1 + static_cast<int>(sm);  // nonzero: resident, and where
    __threadfence_system();
  }
  const float4* s = src + blockIdx.x * per_block;
  float4* d = dst + blockIdx.x * per_block;
  unsigned long long bytes = 0;
  const long long start = clock64();
  while (clock64() - start < cycles) {
    if (!stream_memory) {
      __nanosleep(200);
      continue;
    }
    for (size_t i = threadIdx.x; i < per_block; i += blockDim.x) {
      staging[threadIdx.x] = s[i];
      d[i] = staging[threadIdx.x];
    }
    bytes += 2 * sizeof(float4) * per_block / blockDim.x;
  }
  atomicAdd(moved, bytes);
}

__global__ void add_arrays(const float4* a, const float4* b, float4* c, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  float4 x = a[i], y = b[i];
  c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}

struct Gemm {
  cublasLtHandle_t lt;
  int64_t m, n, k;
  int sm_target;  // 0: cuBLAS's own choice
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo;
  void* workspace;
  size_t workspace_bytes = 64 << 20;
  __nv_bfloat16 *da, *db, *dc;

  Gemm(cublasLtHandle_t handle, int64_t m_, int64_t n_, int64_t k_, int sm_target_)
      : lt(handle), m(m_), n(n_), k(k_), sm_target(sm_target_) {
    check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
    cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
    // C (m x n, column-major n-leading as PyTorch's row-major x @ W^T) = A^T B.
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), "transa");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)), "transb");
    if (sm_target > 0)
      check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sm_target, sizeof(sm_target)),
            "sm target");
    check(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, m, k), "a");
    check(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, n, k), "b");
    check(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, m, n, m), "c");
    check(cudaMalloc(&workspace, workspace_bytes), "workspace");
    check(cudaMalloc(&da, sizeof(__nv_bfloat16) * m * k), "A");
    check(cudaMalloc(&db, sizeof(__nv_bfloat16) * k * n), "B");
    check(cudaMalloc(&dc, sizeof(__nv_bfloat16) * m * n), "C");
    check(cudaMemset(da, 0x3c, sizeof(__nv_bfloat16) * m * k), "fill A");
    check(cudaMemset(db, 0x3c, sizeof(__nv_bfloat16) * k * n), "fill B");
    cublasLtMatmulPreference_t pref;
    check(cublasLtMatmulPreferenceCreate(&pref), "pref");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                               sizeof(workspace_bytes)),
          "pref workspace");
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    check(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, c, c, pref, 1, &result, &found), "heuristic");
    if (found == 0) {
      std::fprintf(stderr, "no cuBLASLt algorithm for %ldx%ldx%ld\n", long(m), long(n), long(k));
      std::exit(1);
    }
    algo = result.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  // cuBLASLt's names for the chosen kernel's configuration.
  std::string config() const {
    auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
      uint32_t value = 0;
      size_t written = 0;
      cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written);
      return std::to_string(value);
    };
    return "algo " + get(CUBLASLT_ALGO_CONFIG_ID) + " tile " + get(CUBLASLT_ALGO_CONFIG_TILE_ID) + " splitk " +
           get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM) + " swizzle " + get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING) + " stages " +
           get(CUBLASLT_ALGO_CONFIG_STAGES_ID) + " inner " + get(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID) + " cluster " +
           get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  }
  void run(cudaStream_t s) const {
    const float one = 1, zero = 0;
    check(cublasLtMatmul(lt, desc, &one, da, a, db, b, &zero, dc, c, dc, c, &algo, workspace, workspace_bytes, s),
          "matmul");
  }
  ~Gemm() {
    cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(workspace);
    cublasLtMatrixLayoutDestroy(a), cublasLtMatrixLayoutDestroy(b), cublasLtMatrixLayoutDestroy(c);
    cublasLtMatmulDescDestroy(desc);
  }
};

struct Holder {
  int sms = 0;
  bool stream_memory = false;
  int shared_kb = 48;
  int cluster = 1;  // CTAs launched as clusters of this many (SMs of one GPC)
};

struct Timing {
  double per_run_ms;   // the victim's mean time per run
  bool waited;         // the victim finished after the holder
  double holder_gbps;  // bytes the holder moved per second
};

struct Bench {
  cudaStream_t victim_stream, holder_stream;
  cudaEvent_t v0, v1, h0, h1;
  volatile int* resident;  // mapped host memory the holder's CTAs mark
  int* resident_device;
  float4 *src, *dst;
  size_t holder_floats4 = size_t(1) << 24;  // 256 MB each way
  unsigned long long* moved;
  double cycles_per_ms = 0;

  Bench() {
    check(cudaStreamCreateWithFlags(&victim_stream, cudaStreamNonBlocking), "stream");
    check(cudaStreamCreateWithFlags(&holder_stream, cudaStreamNonBlocking), "stream");
    for (cudaEvent_t* e : {&v0, &v1, &h0, &h1}) check(cudaEventCreate(e), "event");
    int* host = nullptr;
    check(cudaHostAlloc(&host, 1024 * sizeof(int), cudaHostAllocMapped), "mapped");
    resident = host;
    check(cudaHostGetDevicePointer(&resident_device, host, 0), "mapped pointer");
    check(cudaMalloc(&src, holder_floats4 * sizeof(float4)), "src");
    check(cudaMalloc(&dst, holder_floats4 * sizeof(float4)), "dst");
    check(cudaMalloc(&moved, sizeof(unsigned long long)), "moved");
    check(cudaFuncSetAttribute(hold_sms, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10), "smem");
    // The SM clock against wall time, for a holder of a given length.
    launch_holder({1, false, 48}, 100000000LL);
    check(cudaEventSynchronize(h1), "calibrate");
    float ms = 0;
    cudaEventElapsedTime(&ms, h0, h1);
    cycles_per_ms = 1e8 / ms;
  }

  void launch_holder(const Holder& h, long long cycles) {
    for (int i = 0; i < h.sms; ++i) resident[i] = 0;
    check(cudaMemsetAsync(moved, 0, sizeof(*moved), holder_stream), "reset");
    check(cudaEventRecord(h0, holder_stream), "h0");
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(h.sms);
    config.blockDim = dim3(512);
    config.dynamicSmemBytes = size_t(h.shared_kb) << 10;
    config.stream = holder_stream;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = h.cluster;
    cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    check(cudaLaunchKernelEx(&config, hold_sms, h.stream_memory, cycles, resident_device,
                             static_cast<const float4*>(src), dst, holder_floats4 / h.sms, moved),
          "holder launch");
    check(cudaEventRecord(h1, holder_stream), "h1");
    for (;;) {
      int up = 0;
      for (int i = 0; i < h.sms; ++i) up += resident[i] != 0;
      if (up == h.sms) break;
      std::this_thread::yield();
    }
  }

  template <class Victim>
  Timing time(const Holder& h, const Victim& victim, int runs, double holder_ms) {
    victim(victim_stream);  // warm
    check(cudaStreamSynchronize(victim_stream), "warm");
    if (h.sms > 0) launch_holder(h, static_cast<long long>(holder_ms * cycles_per_ms));
    check(cudaEventRecord(v0, victim_stream), "v0");
    for (int i = 0; i < runs; ++i) victim(victim_stream);
    check(cudaEventRecord(v1, victim_stream), "v1");
    check(cudaDeviceSynchronize(), "sync");
    float ms = 0;
    cudaEventElapsedTime(&ms, v0, v1);
    Timing t{ms / runs, false, 0};
    if (h.sms > 0) {
      float after = 0, held = 0;
      cudaEventElapsedTime(&after, h1, v1);
      cudaEventElapsedTime(&held, h0, h1);
      unsigned long long bytes = 0;
      cudaMemcpy(&bytes, moved, sizeof(bytes), cudaMemcpyDeviceToHost);
      t.waited = after > 0;
      t.holder_gbps = bytes / (held * 1e-3) / 1e9;
    }
    return t;
  }
};

// Each GEMM's configuration, its time beside an idle holder of k SMs for
// every k up to 40, and the time a holder shorter than the GEMMs adds.
void sweep(Bench& bench, cublasLtHandle_t lt, int sms) {
  struct Shape {
    int64_t m, n, k;
  };
  const std::vector<Shape> shapes = {{8192, 4096, 4096}, {8192, 14336, 4096}, {16384, 8192, 8192},
                                     {8192, 1024, 4096}, {4096, 4096, 8192},  {2048, 2048, 4096}};
  std::printf("victim\theld_sms\tms_per_run\tratio\tsms/(sms-k)\n");
  for (const Shape& s : shapes) {
    Gemm gemm(lt, s.m, s.n, s.k, 0);
    auto run = [&](cudaStream_t st) { gemm.run(st); };
    const std::string name = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    std::printf("# %s: %s\n", name.c_str(), gemm.config().c_str());
    const double once = bench.time(Holder{}, run, 10, 0).per_run_ms;
    const int runs = std::max(3, static_cast<int>(8.0 / once));
    const double alone = bench.time(Holder{}, run, runs, 0).per_run_ms;
    for (int k = 0; k <= 40; ++k) {
      const double ms = k == 0 ? alone : bench.time(Holder{k, false, 48}, run, runs, 30).per_run_ms;
      std::printf("%s\t%d\t%.4f\t%.3f\t%.3f\n", name.c_str(), k, ms, ms / alone, double(sms) / (sms - k));
    }
    // A holder lasting part of the run: the time it adds against its length.
    for (int k : {16, 24}) {
      for (double share : {0.25, 0.5}) {
        const double held_ms = share * alone * runs;
        const Timing t = bench.time(Holder{k, false, 48}, run, runs, held_ms);
        const double added = (t.per_run_ms - alone) * runs;
        std::printf(
            "# %s: %d SMs held for %.2f ms of a %.2f ms run add %.3f ms (%.3f of the held time; "
            "k/(sms-k) = %.3f)\n",
            name.c_str(), k, held_ms, alone * runs, added, added / held_ms, double(k) / (sms - k));
      }
    }
    std::fflush(stdout);
  }
}

// Where the holder's CTAs land and whether that explains the GEMMs' loss:
// how many clusters of 2-16 CTAs of one SM each fit at once (the GPCs'
// sizes), the SMs k holder CTAs occupy, and the GEMMs beside holders
// launched as single CTAs and as clusters of 2 (whole SM pairs).
void placement(Bench& bench, cublasLtHandle_t lt, int sms) {
  for (int size : {2, 4, 8, 16}) {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(size * 64);
    config.blockDim = dim3(512);
    config.dynamicSmemBytes = 120 << 10;
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = size;
    cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
    config.attrs = &cluster;
    config.numAttrs = 1;
    if (size > 8) cudaFuncSetAttribute(hold_sms, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    int clusters = 0;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, hold_sms, &config);
    std::printf("# clusters of %d one-SM CTAs resident at once: %d (%s)\n", size, clusters, cudaGetErrorString(e));
  }
  for (int k : {1, 2, 4, 8, 16, 24}) {
    bench.launch_holder(Holder{k, false, 120, 1}, static_cast<long long>(5 * bench.cycles_per_ms));
    std::printf("# %d holder CTAs on SMs:", k);
    for (int i = 0; i < k; ++i) std::printf(" %d", bench.resident[i] - 1);
    std::printf("\n");
    check(cudaDeviceSynchronize(), "sync");
  }
  struct Shape {
    int64_t m, n, k;
  };
  std::printf("victim\theld_sms\tsingle_ratio\tpairs_ratio\tsms/(sms-k)\n");
  for (const Shape& s : std::vector<Shape>{{8192, 4096, 4096}, {8192, 14336, 4096}, {2048, 2048, 4096}}) {
    Gemm gemm(lt, s.m, s.n, s.k, 0);
    auto run = [&](cudaStream_t st) { gemm.run(st); };
    const double once = bench.time(Holder{}, run, 10, 0).per_run_ms;
    const int runs = std::max(3, static_cast<int>(8.0 / once));
    const double alone = bench.time(Holder{}, run, runs, 0).per_run_ms;
    const std::string name = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    for (int k : {2, 4, 8, 16, 24, 32}) {
      const double single = bench.time(Holder{k, false, 120, 1}, run, runs, 30).per_run_ms;
      const double pairs = bench.time(Holder{k, false, 120, 2}, run, runs, 30).per_run_ms;
      std::printf("%s\t%d\t%.3f\t%.3f\t%.3f\n", name.c_str(), k, single / alone, pairs / alone,
                  double(sms) / (sms - k));
    }
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  const int sms = prop.multiProcessorCount;
  std::printf("# %s, %d SMs, %zu KB shared memory per SM\n", prop.name, sms, prop.sharedMemPerMultiprocessor >> 10);
  Bench bench;
  std::printf("# SM clock %.0f MHz\n", bench.cycles_per_ms / 1e3);
  cublasLtHandle_t lt;
  check(cublasLtCreate(&lt), "cublasLt");
  if (argc > 1 && std::string(argv[1]) == "sweep") {
    sweep(bench, lt, sms);
    return 0;
  }
  if (argc > 1 && std::string(argv[1]) == "placement") {
    placement(bench, lt, sms);
    return 0;
  }

  struct Shape {
    int64_t m, n, k;
  };
  const std::vector<Shape> shapes = {{8192, 4096, 4096}, {8192, 14336, 4096}, {2048, 2048, 4096}};
  const std::vector<int> held = {2, 8, 16, 20, 24, 32};
  const std::vector<Holder> kinds = {{0, false, 48}, {0, false, 120}, {0, true, 48}};
  std::printf(
      "victim\tsm_target\tholder\tshared_kb\theld_sms\tms_per_run\talone_ms\tratio\tsms/(sms-k)\twaited\t"
      "holder_GB/s\n");

  auto report = [&](const std::string& victim, int target, const Holder& h, const Timing& t, double alone) {
    std::printf("%s\t%d\t%s\t%d\t%d\t%.4f\t%.4f\t%.3f\t%.3f\t%s\t%.0f\n", victim.c_str(), target,
                h.stream_memory ? "stream" : "idle", h.shared_kb, h.sms, t.per_run_ms, alone, t.per_run_ms / alone,
                double(sms) / (sms - h.sms), t.waited ? "yes" : "no", t.holder_gbps);
    std::fflush(stdout);
  };

  for (const Shape& s : shapes) {
    Gemm own(lt, s.m, s.n, s.k, 0);
    auto run_own = [&](cudaStream_t st) { own.run(st); };
    const double alone = bench.time(Holder{}, run_own, 20, 0).per_run_ms;
    const int runs = std::max(3, static_cast<int>(8.0 / alone));  // about 8 ms of GEMMs
    const double alone_many = bench.time(Holder{}, run_own, runs, 0).per_run_ms;
    const std::string name = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
    report("gemm " + name, 0, Holder{}, Timing{alone_many, false, 0}, alone_many);
    for (int k : held) {
      Gemm margin(lt, s.m, s.n, s.k, sms - k);
      auto run_margin = [&](cudaStream_t st) { margin.run(st); };
      for (Holder h : kinds) {
        h.sms = k;
        report("gemm " + name, 0, h, bench.time(h, run_own, runs, 30), alone_many);
        report("gemm " + name, sms - k, h, bench.time(h, run_margin, runs, 30), alone_many);
      }
    }
  }

  const size_t n4 = size_t(1) << 24;  // 3 x 256 MB
  float4 *a, *b, *c;
  check(cudaMalloc(&a, n4 * sizeof(float4)), "a");
  check(cudaMalloc(&b, n4 * sizeof(float4)), "b");
  check(cudaMalloc(&c, n4 * sizeof(float4)), "c");
  auto add = [&](cudaStream_t st) { add_arrays<<<(n4 + 255) / 256, 256, 0, st>>>(a, b, c, n4); };
  const double add_alone = bench.time(Holder{}, add, 30, 0).per_run_ms;
  report("add 768MB", 0, Holder{}, Timing{add_alone, false, 0}, add_alone);
  std::printf("# add alone: %.0f GB/s\n", 3.0 * n4 * sizeof(float4) / (add_alone * 1e-3) / 1e9);
  for (int k : held) {
    for (Holder h : kinds) {
      h.sms = k;
      report("add 768MB", 0, h, bench.time(h, add, 30, 30), add_alone);
    }
  }
  // The holder alone: how fast k streaming CTAs move memory by themselves.
  for (int k : held) {
    Holder h{k, true, 48};
    auto nothing = [](cudaStream_t) {};
    report("none", 0, h, bench.time(h, nothing, 1, 10), 1);
  }
  return 0;
}
