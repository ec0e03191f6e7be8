// Tensor types of IR values: an element type and a LOCAL (per-device) shape.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dstc::ir {

// F8E4M3 and F8E5M2: the two 8-bit floats of FP8 training (OCP: 3 and 2
// mantissa bits, max finite 448 and 57344), held with a scale (`quantize`).
enum class DType : uint8_t { F32, F16, BF16, F64, I32, I64, I8, U8, F8E4M3, F8E5M2 };

inline constexpr int kMaxRank = 8;

// The most elements a tensor may have (about 2.8e14, 560 TB in bf16), in
// a .dstrat model or an IR file: beyond any model, and small enough that
// sizes, bytes and FLOPs computed from tensors never overflow 64 bits.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 48;

// How an FP8 tensor is scaled, from `quantize`'s `block` attribute: 0 one
// scale for the tensor, kRowwiseBlock one per row of the last dim, n > 0
// one per n elements of it.
enum class Fp8Scaling : uint8_t { Tensorwise, Rowwise, Blockwise };
inline constexpr int64_t kRowwiseBlock = -1;
inline Fp8Scaling fp8_scaling(int64_t block) {
  return block == 0 ? Fp8Scaling::Tensorwise : block == kRowwiseBlock ? Fp8Scaling::Rowwise : Fp8Scaling::Blockwise;
}

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
int dtype_bytes(DType t);
bool is_float(DType t);
bool is_fp8(DType t);

// A value type held by value (interned in the module as a TypeId).
struct TensorType {
  DType dtype = DType::F32;
  uint8_t rank = 0;
  std::array<int64_t, kMaxRank> dims{};

  TensorType() = default;
  TensorType(DType t, std::span<const int64_t> shape);
  TensorType(DType t, std::initializer_list<int64_t> shape)
      : TensorType(t, std::span<const int64_t>(shape.begin(), shape.size())) {}

  std::span<const int64_t> shape() const { return {dims.data(), rank}; }
  int64_t dim(int i) const { return dims[static_cast<size_t>(i)]; }
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype_bytes(dtype); }
  friend bool operator==(const TensorType& a, const TensorType& b);
};

}  // namespace dstc::ir

namespace dstc::ir {
// "f32[4, 8]"; a scalar is "f32[]".
std::string to_string(const TensorType& t);
}  // namespace dstc::ir
