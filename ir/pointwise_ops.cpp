// The scalar semantics of the pointwise activations (pointwise_ops.def).
#include "ir/pointwise_ops.h"

#include <array>
#include <cmath>
#include <numbers>

namespace dstc::ir {
namespace {

double gelu_forward(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_backward(double dy, double x) {
  double cdf = 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  return dy * (cdf + x * pdf);
}

double relu_forward(double x) { return std::max(x, 0.0); }
double relu_backward(double dy, double x) { return x > 0 ? dy : 0.0; }

double tanh_forward(double x) { return std::tanh(x); }
double tanh_backward(double dy, double y) { return dy * (1 - y * y); }

double sigmoid_forward(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double sigmoid_backward(double dy, double y) { return dy * y * (1 - y); }

double silu_forward(double x) { return x / (1.0 + std::exp(-x)); }
double silu_backward(double dy, double x) {
  double s = 1.0 / (1.0 + std::exp(-x));
  return dy * s * (1 + x * (1 - s));
}

constexpr std::array kPointwise = {
#define DSTC_POINTWISE(kind, name, grad, grad_name, flops, grad_flops, reads, semantics, summary) \
  PointwiseOp{OpKind::kind,        OpKind::grad,         flops,  grad_flops, GradReads::reads,    \
              semantics##_forward, semantics##_backward, summary},
#include "ir/pointwise_ops.def"
#undef DSTC_POINTWISE
};

}  // namespace

std::span<const PointwiseOp> pointwise_ops() { return kPointwise; }

const PointwiseOp* find_pointwise(OpKind kind) {
  for (const PointwiseOp& p : kPointwise) {
    if (p.kind == kind || p.grad == kind) return &p;
  }
  return nullptr;
}

}  // namespace dstc::ir
