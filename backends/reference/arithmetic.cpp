#include "backends/reference/arithmetic.h"

#include <algorithm>
#include <cmath>

namespace dstc::reference {

namespace {

// Rounds to a float with `mantissa` stored bits and the exponent range of
// float32 (bf16) or IEEE half (f16), to nearest even.
double round_to_bits(double x, int mantissa, int min_exponent, double max_finite) {
  if (!std::isfinite(x) || x == 0) return x;
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  int e = std::max(exponent - 1, min_exponent);
  double quantum = std::ldexp(1.0, e - mantissa);
  double r = std::nearbyint(x / quantum) * quantum;
  if (std::abs(r) > max_finite) return std::copysign(INFINITY, x);
  return r;
}

}  // namespace

double fp8_max(ir::DType format) { return format == ir::DType::F8E4M3 ? 448.0 : 57344.0; }

double round_to_fp8(double x, ir::DType format) {
  // e4m3: 3 mantissa bits, normals from 2^-6; e5m2: 2 bits, from 2^-14.
  const bool e4m3 = format == ir::DType::F8E4M3;
  double r = round_to_bits(x, e4m3 ? 3 : 2, e4m3 ? -6 : -14, INFINITY);
  return std::clamp(r, -fp8_max(format), fp8_max(format));
}

std::optional<Arithmetic> parse_arithmetic(std::string_view name) {
  if (name == "f32") return Arithmetic::F32;
  if (name == "f64") return Arithmetic::F64;
  if (name == "native") return Arithmetic::Native;
  return std::nullopt;
}

void round_to_storage(HostTensor& t, Arithmetic a) {
  if (!ir::is_float(t.dtype) || a == Arithmetic::F64) return;
  ir::DType storage = a == Arithmetic::F32 ? ir::DType::F32 : t.dtype;
  switch (storage) {
    case ir::DType::F64: return;
    case ir::DType::BF16:
      for (double& v : t.data) v = round_to_bits(v, 7, -126, 3.3895313892515355e38);
      return;
    case ir::DType::F16:
      for (double& v : t.data) v = round_to_bits(v, 10, -14, 65504.0);
      return;
    default:
      for (double& v : t.data) v = static_cast<float>(v);
      return;
  }
}

}  // namespace dstc::reference
