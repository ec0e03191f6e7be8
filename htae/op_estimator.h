// Compute time of one op on one GPU: a roofline,
//   max(flops / (peak x compute efficiency), bytes / (HBM bandwidth x memory efficiency))
//   + kernel launch overhead,
// with efficiencies that depend on the op's class and size (curves in
// docs/cost-model.md), overridden by a profile database where it has data.
#pragma once

#include "htae/op_cost.h"
#include "htae/profile_database.h"

namespace dstc::htae {

struct OpCostEstimate {
  double seconds = 0;
  double compute_seconds = 0;  // the roofline's two terms, before overhead
  double memory_seconds = 0;
  bool from_profile = false;
};

// The efficiency curves: e(x) = peak x x / (x + half), saturating at `peak`
// and reaching half of it at `half`.
struct EfficiencyCurves {
  double matmul_peak = 0.80;  // of the tensor-core peak, large matmuls
  // FP8 matmuls reach less of their (doubled) peak: `dstc calibrate` on an
  // H100 and an H200 measured layer-sized fp8 GEMMs 0.90-0.92 as fast as
  // 0.80 predicts where bf16 ran 0.99-1.01 (docs/accuracy.md, "Matmul rates").
  double matmul_peak_fp8 = 0.73;
  // The rate of an fp8 GEMM whose scales are per row, or per block of
  // 1x128 (128x128 for a weight), against one scale per tensor (the
  // profiles' and the 0.73 above): cuBLASLt through torch._scaled_mm on an
  // H100 and an H200, Llama 3 layer shapes, medians 0.95 and 0.82 on both
  // (bench/results/fp8_scaling_recipes_2026-11-28/). Row scales are applied
  // in the epilogue; block scales in the main loop, each 128 of k.
  double fp8_rowwise_rate = 0.95;
  double fp8_blockwise_rate = 0.82;
  double matmul_half_dim = 128;  // smallest of m, n, k at which half is reached
  double memory_peak = 0.85;     // of HBM bandwidth, large elementwise ops
  double reduction_peak = 0.70;  // of HBM bandwidth, reductions and norms
  // Of HBM bandwidth, the optimizer step: PyTorch's fused AdamW (the
  // multi-tensor kind Megatron's and DeepSpeed's fused Adams are) streamed
  // fp32 parameters, gradients and moments at 0.78 of an H100's from 512 M
  // parameters up (bench/results/calibration_h100_2026-11-26/torch_optimizer_step.jsonl).
  double optimizer_peak = 0.78;
  double memory_half_bytes = 256 * 1024;
  double vector_compute = 0.50;  // of the fp32 peak, non-matmul FLOPs
};

class OpEstimator {
 public:
  explicit OpEstimator(const GpuSpec& gpu, const ProfileDatabase* profile = nullptr, EfficiencyCurves curves = {});

  OpCostEstimate estimate(const OpCostQuery& query) const;
  // The roofline, with the profile's fitted rate curves where it has them
  // but none of its per-op entries.
  OpCostEstimate roofline(const OpCostQuery& query) const;
  double matmul_efficiency(int64_t smallest_dim, ComputeDtype dtype = ComputeDtype::Bf16) const;
  double memory_efficiency(OpClass op_class, double bytes) const;
  // An fp8 GEMM's rate with these scales against one scale per tensor.
  double fp8_scaling_rate(ir::Fp8Scaling scaling) const;
  // The class's share of HBM bandwidth once large.
  double memory_peak(OpClass op_class) const;
  // FLOP/s of an [m, n, k] matmul and bytes/s of a memory-bound op: the
  // profile's measured rates, else the cluster's peaks times the
  // efficiencies.
  double matmul_rate(ComputeDtype dtype, const std::vector<int64_t>& mnk) const;
  double memory_rate(OpClass op_class, double bytes) const;

 private:
  GpuSpec gpu_;
  const ProfileDatabase* profile_;
  EfficiencyCurves curves_;
};

}  // namespace dstc::htae
