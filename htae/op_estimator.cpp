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
    {"matmul", OpClass::matmul},
    {"batch_matmul", OpClass::matmul},
    {"bmm", OpClass::matmul},
    {"linear", OpClass::matmul},
    {"einsum", OpClass::matmul},
    {"conv", OpClass::matmul},
    {"conv2d", OpClass::matmul},
    {"attention", OpClass::matmul},
    {"softmax", OpClass::reduction},
    {"log_softmax", OpClass::reduction},
    {"layer_norm", OpClass::reduction},
    {"layernorm", OpClass::reduction},
    {"rms_norm", OpClass::reduction},
    {"batch_norm", OpClass::reduction},
    {"reduce_sum", OpClass::reduction},
    {"reduce_mean", OpClass::reduction},
    {"reduce_max", OpClass::reduction},
    {"cross_entropy", OpClass::reduction},
    {"reshape", OpClass::free},
    {"view", OpClass::free},
    {"squeeze", OpClass::free},
    {"unsqueeze", OpClass::free},
    {"identity", OpClass::free},
    // The IR's gradient kinds (ir/op_kinds.def).
    {"attention_grad", OpClass::matmul},
    {"conv2d_input_grad", OpClass::matmul},
    {"conv2d_weight_grad", OpClass::matmul},
    {"softmax_grad", OpClass::reduction},
    {"layernorm_grad", OpClass::reduction},
    {"layernorm_weight_grad", OpClass::reduction},
    {"batchnorm", OpClass::reduction},
    {"batchnorm_grad", OpClass::reduction},
    {"cross_entropy_grad", OpClass::reduction},
    {"sum", OpClass::reduction},
}};

double saturating(double peak, double x, double half) { return peak * x / (x + half); }

}  // namespace

OpClass classify_op(std::string_view kind) {
  for (const KindClass& k : kKindClasses) {
    if (k.kind == kind) return k.op_class;
  }
  return OpClass::elementwise;
}

OpEstimator::OpEstimator(const GpuSpec& gpu, const ProfileDatabase* profile, EfficiencyCurves curves)
    : gpu_(gpu), profile_(profile), curves_(curves) {}

double OpEstimator::matmul_efficiency(int64_t smallest_dim) const {
  return saturating(curves_.matmul_peak, static_cast<double>(std::max<int64_t>(smallest_dim, 1)),
                    curves_.matmul_half_dim);
}

double OpEstimator::memory_efficiency(OpClass op_class, double bytes) const {
  double peak = op_class == OpClass::reduction ? curves_.reduction_peak : curves_.memory_peak;
  return saturating(peak, std::max(bytes, 1.0), curves_.memory_half_bytes);
}

OpCostEstimate OpEstimator::roofline(const OpCostQuery& query) const {
  OpCostEstimate e;
  OpClass op_class = classify_op(query.kind);
  if (op_class == OpClass::free) return e;
  if (query.flops > 0) {
    double rate;
    if (op_class == OpClass::matmul) {
      int64_t smallest = query.shape.empty() ? 1 : *std::min_element(query.shape.begin(), query.shape.end());
      rate = gpu_.peak(query.dtype) * matmul_efficiency(smallest);
    } else {
      rate = gpu_.peak(ComputeDtype::fp32) * curves_.vector_compute;
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
  if (!profile_ || classify_op(query.kind) == OpClass::free) return e;
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
