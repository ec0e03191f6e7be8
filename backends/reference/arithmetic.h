// The precision the reference executor stores floating-point values in.
// Kernels compute in double and round every float result to it, so a value
// is always a number of the storage type.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "backends/reference/host_tensor.h"

namespace dstc::reference {

enum class Arithmetic : uint8_t {
  F32,     // every float value is a float32, whatever its IR dtype
  F64,     // every float value is a float64
  Native,  // each value in its IR dtype (bf16 and f16 rounded to nearest even)
};

std::optional<Arithmetic> parse_arithmetic(std::string_view name);

// Rounds every element of a float tensor to the storage precision.
void round_to_storage(HostTensor& t, Arithmetic a);

// x rounded to the nearest f8e4m3 or f8e5m2 number (ties to even); past the
// largest finite one, that one (saturating, as FP8 casts in training do).
double round_to_fp8(double x, ir::DType format);
// The largest finite number of an fp8 format: 448 (e4m3), 57344 (e5m2).
double fp8_max(ir::DType format);

}  // namespace dstc::reference
