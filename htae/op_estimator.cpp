#include "htae/op_estimator.h"

#include <algorithm>

namespace dstc::htae {
namespace {

double saturating(double peak, double x, double half) { return peak * x / (x + half); }

}  // namespace

OpEstimator::OpEstimator(const GpuSpec& gpu, const ProfileDatabase* profile, EfficiencyCurves curves)
    : gpu_(gpu), profile_(profile), curves_(curves) {}

double OpEstimator::matmul_efficiency(int64_t smallest_dim, ComputeDtype dtype) const {
  return saturating(dtype == ComputeDtype::Fp8 ? curves_.matmul_peak_fp8 : curves_.matmul_peak,
                    static_cast<double>(std::max<int64_t>(smallest_dim, 1)), curves_.matmul_half_dim);
}

double OpEstimator::fp8_scaling_rate(ir::Fp8Scaling scaling) const {
  switch (scaling) {
    case ir::Fp8Scaling::Rowwise: return curves_.fp8_rowwise_rate;
    case ir::Fp8Scaling::Blockwise: return curves_.fp8_blockwise_rate;
    case ir::Fp8Scaling::Tensorwise: break;
  }
  return 1.0;
}

double OpEstimator::memory_peak(OpClass op_class) const {
  switch (op_class) {
    case OpClass::Reduction: return curves_.reduction_peak;
    case OpClass::Optimizer: return curves_.optimizer_peak;
    default: return curves_.memory_peak;
  }
}

double OpEstimator::memory_efficiency(OpClass op_class, double bytes) const {
  return saturating(memory_peak(op_class), std::max(bytes, 1.0), curves_.memory_half_bytes);
}

double OpEstimator::matmul_rate(ComputeDtype dtype, const std::vector<int64_t>& mnk) const {
  if (profile_) {
    if (std::optional<double> measured = profile_->matmul_rate(dtype, mnk)) return *measured;
  }
  int64_t smallest = mnk.empty() ? 1 : *std::min_element(mnk.begin(), mnk.end());
  return gpu_.peak(dtype) * matmul_efficiency(smallest, dtype);
}

double OpEstimator::memory_rate(OpClass op_class, double bytes) const {
  if (profile_ && profile_->memory_curve) {
    // Measured on streaming kernels; reductions and optimizer steps keep
    // their assumed share of it.
    return profile_->memory_curve->at(std::max(bytes, 1.0)) * memory_peak(op_class) / curves_.memory_peak;
  }
  return gpu_.hbm_bandwidth * memory_efficiency(op_class, bytes);
}

OpCostEstimate OpEstimator::roofline(const OpCostQuery& query) const {
  OpCostEstimate e;
  OpClass op_class = query.op_class;
  if (op_class == OpClass::Free) return e;
  if (query.flops > 0) {
    double rate;
    if (op_class == OpClass::Matmul) {
      rate = matmul_rate(query.dtype, query.shape);
      if (query.dtype == ComputeDtype::Fp8) rate *= fp8_scaling_rate(query.fp8_scaling);
    } else {
      rate = gpu_.peak(ComputeDtype::Fp32) * curves_.vector_compute;
    }
    e.compute_seconds = query.flops / rate;
  }
  if (query.bytes() > 0) e.memory_seconds = query.bytes() / memory_rate(op_class, query.bytes());
  double launch = profile_ && profile_->launch_overhead ? *profile_->launch_overhead : gpu_.launch_overhead;
  e.seconds = std::max(e.compute_seconds, e.memory_seconds) + launch;
  return e;
}

OpCostEstimate OpEstimator::estimate(const OpCostQuery& query) const {
  OpCostEstimate e = roofline(query);
  OpClass op_class = query.op_class;
  if (!profile_ || op_class == OpClass::Free) return e;
  if (profile_->rates_cover(op_class, query)) {
    // The roofline above already ran at the measured rates.
    if (std::optional<double> measured = profile_->exact_op_seconds(query)) e.seconds = *measured;
    e.from_profile = true;
    return e;
  }
  if (std::optional<double> measured = profile_->op_seconds(query)) {
    e.seconds = *measured;
    e.from_profile = true;
  } else if (const OpProfileEntry* near = profile_->nearest_op(query)) {
    // Outside the measured sizes: the roofline, corrected by how far the
    // nearest measurement was from its own roofline.
    OpCostQuery at{near->kind, op_class, near->dtype, near->flops, near->bytes, 0, near->shape};
    e.seconds *= near->seconds / roofline(at).seconds;
    e.from_profile = true;
  }
  return e;
}

}  // namespace dstc::htae
