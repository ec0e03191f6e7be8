#include "htae/op_estimator.h"

#include <algorithm>
#include <array>

namespace dstc::htae {
namespace {

struct KindClass {
  std::string_view kind;
  OpClass op_class;
};

// Kinds not listed are elementwise.
constexpr std::array<KindClass, 33> kKindClasses = {{
    {"matmul", OpClass::Matmul},
    {"batch_matmul", OpClass::Matmul},
    {"bmm", OpClass::Matmul},
    {"linear", OpClass::Matmul},
    {"einsum", OpClass::Matmul},
    {"conv", OpClass::Matmul},
    {"conv2d", OpClass::Matmul},
    {"attention", OpClass::Matmul},
    {"softmax", OpClass::Reduction},
    {"log_softmax", OpClass::Reduction},
    {"layer_norm", OpClass::Reduction},
    {"layernorm", OpClass::Reduction},
    {"rms_norm", OpClass::Reduction},
    {"batch_norm", OpClass::Reduction},
    {"reduce_sum", OpClass::Reduction},
    {"reduce_mean", OpClass::Reduction},
    {"reduce_max", OpClass::Reduction},
    {"cross_entropy", OpClass::Reduction},
    {"reshape", OpClass::Free},
    {"view", OpClass::Free},
    {"squeeze", OpClass::Free},
    {"unsqueeze", OpClass::Free},
    {"identity", OpClass::Free},
    // The IR's gradient kinds (ir/op_kinds.def).
    {"attention_grad", OpClass::Matmul},
    {"conv2d_input_grad", OpClass::Matmul},
    {"conv2d_weight_grad", OpClass::Matmul},
    {"softmax_grad", OpClass::Reduction},
    {"layernorm_grad", OpClass::Reduction},
    {"layernorm_weight_grad", OpClass::Reduction},
    {"batchnorm", OpClass::Reduction},
    {"batchnorm_grad", OpClass::Reduction},
    {"cross_entropy_grad", OpClass::Reduction},
    {"sum", OpClass::Reduction},
}};

double saturating(double peak, double x, double half) { return peak * x / (x + half); }

}  // namespace

OpClass classify_op(std::string_view kind) {
  for (const KindClass& k : kKindClasses) {
    if (k.kind == kind) return k.op_class;
  }
  return OpClass::Elementwise;
}

OpEstimator::OpEstimator(const GpuSpec& gpu, const ProfileDatabase* profile, EfficiencyCurves curves)
    : gpu_(gpu), profile_(profile), curves_(curves) {}

double OpEstimator::matmul_efficiency(int64_t smallest_dim) const {
  return saturating(curves_.matmul_peak, static_cast<double>(std::max<int64_t>(smallest_dim, 1)),
                    curves_.matmul_half_dim);
}

double OpEstimator::memory_efficiency(OpClass op_class, double bytes) const {
  double peak = op_class == OpClass::Reduction ? curves_.reduction_peak : curves_.memory_peak;
  return saturating(peak, std::max(bytes, 1.0), curves_.memory_half_bytes);
}

OpCostEstimate OpEstimator::roofline(const OpCostQuery& query) const {
  OpCostEstimate e;
  OpClass op_class = classify_op(query.kind);
  if (op_class == OpClass::Free) return e;
  if (query.flops > 0) {
    double rate;
    if (op_class == OpClass::Matmul) {
      int64_t smallest = query.shape.empty() ? 1 : *std::min_element(query.shape.begin(), query.shape.end());
      rate = gpu_.peak(query.dtype) * matmul_efficiency(smallest);
    } else {
      rate = gpu_.peak(ComputeDtype::Fp32) * curves_.vector_compute;
    }
    e.compute_seconds = query.flops / rate;
  }
  if (query.bytes() > 0) {
    e.memory_seconds = query.bytes() / (gpu_.hbm_bandwidth * memory_efficiency(op_class, query.bytes()));
  }
  e.seconds = std::max(e.compute_seconds, e.memory_seconds) + gpu_.launch_overhead;
  return e;
}

OpCostEstimate OpEstimator::estimate(const OpCostQuery& query) const {
  OpCostEstimate e = roofline(query);
  if (!profile_ || classify_op(query.kind) == OpClass::Free) return e;
  if (std::optional<double> measured = profile_->op_seconds(query)) {
    e.seconds = *measured;
    e.from_profile = true;
  } else if (const OpProfileEntry* near = profile_->nearest_op(query)) {
    // Outside the measured sizes: the roofline, corrected by how far the
    // nearest measurement was from its own roofline.
    OpCostQuery at{near->kind, near->dtype, near->flops, near->bytes, 0, near->shape};
    e.seconds *= near->seconds / roofline(at).seconds;
    e.from_profile = true;
  }
  return e;
}

}  // namespace dstc::htae
