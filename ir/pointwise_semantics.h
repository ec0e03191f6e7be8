// The scalar semantics of the pointwise activations (pointwise_ops.def),
// once, for every element type and every processor: the reference executor
// instantiates them on doubles, the CUDA device's kernels on floats on the
// GPU (nvcc sees __host__ __device__).
#pragma once

#include <cmath>

#include "ir/host_device.h"

namespace dstc::ir::pointwise {

using std::erf, std::exp, std::sqrt, std::tanh;

template <class T>
DSTC_HOST_DEVICE inline T gelu_forward(T x) {
  return T(0.5) * x * (T(1.0) + erf(x / sqrt(T(2.0))));
}
template <class T>
DSTC_HOST_DEVICE inline T gelu_backward(T dy, T x) {
  T cdf = T(0.5) * (T(1.0) + erf(x / T(1.4142135623730951)));
  T pdf = exp(T(-0.5) * x * x) / sqrt(T(2.0) * T(3.141592653589793));
  return dy * (cdf + x * pdf);
}

template <class T>
DSTC_HOST_DEVICE inline T relu_forward(T x) {
  return x < T(0) ? T(0) : x;  // std::max(x, 0)
}
template <class T>
DSTC_HOST_DEVICE inline T relu_backward(T dy, T x) {
  return x > T(0) ? dy : T(0);
}

template <class T>
DSTC_HOST_DEVICE inline T tanh_forward(T x) {
  return tanh(x);
}
template <class T>
DSTC_HOST_DEVICE inline T tanh_backward(T dy, T y) {
  return dy * (T(1) - y * y);
}

template <class T>
DSTC_HOST_DEVICE inline T sigmoid_forward(T x) {
  return T(1.0) / (T(1.0) + exp(-x));
}
template <class T>
DSTC_HOST_DEVICE inline T sigmoid_backward(T dy, T y) {
  return dy * y * (T(1) - y);
}

template <class T>
DSTC_HOST_DEVICE inline T silu_forward(T x) {
  return x / (T(1.0) + exp(-x));
}
template <class T>
DSTC_HOST_DEVICE inline T silu_backward(T dy, T x) {
  T s = T(1.0) / (T(1.0) + exp(-x));
  return dy * s * (T(1) + x * (T(1) - s));
}

}  // namespace dstc::ir::pointwise
