#include "ir/types.h"

#include <algorithm>

namespace dstc::ir {

namespace {
struct DTypeEntry {
  DType type;
  std::string_view name;
  int bytes;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::F32, "f32", 4},       {DType::F16, "f16", 2},       {DType::BF16, "bf16", 2}, {DType::F64, "f64", 8},
    {DType::I32, "i32", 4},       {DType::I64, "i64", 8},       {DType::I8, "i8", 1},     {DType::U8, "u8", 1},
    {DType::F8E4M3, "f8e4m3", 1}, {DType::F8E5M2, "f8e5m2", 1},
};
}  // namespace

std::string_view dtype_name(DType t) { return kDTypes[static_cast<int>(t)].name; }
int dtype_bytes(DType t) { return kDTypes[static_cast<int>(t)].bytes; }
bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64 || is_fp8(t);
}
bool is_fp8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeEntry& e : kDTypes) {
    if (e.name == name) return e.type;
  }
  return std::nullopt;
}

TensorType::TensorType(DType t, std::span<const int64_t> shape) : dtype(t) {
  rank = static_cast<uint8_t>(std::min<size_t>(shape.size(), kMaxRank));
  std::copy_n(shape.begin(), rank, dims.begin());
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool operator==(const TensorType& a, const TensorType& b) {
  return a.dtype == b.dtype && a.rank == b.rank && std::equal(a.dims.begin(), a.dims.begin() + a.rank, b.dims.begin());
}

}  // namespace dstc::ir

namespace dstc::ir {
std::string to_string(const TensorType& t) {
  std::string s(dtype_name(t.dtype));
  s += '[';
  for (int i = 0; i < t.rank; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(t.dims[static_cast<size_t>(i)]);
  }
  s += ']';
  return s;
}
}  // namespace dstc::ir
