#include "ir/fp8_scales.h"

#include "ir/registry.h"

namespace dstc::ir {

std::optional<int64_t> fp8_scale_block(const Module& module, const Function& f, ValueId v) {
  // A few moves at most lie between a quantize and its readers (a gather,
  // a shard); the bound keeps a malformed chain from looping.
  for (int depth = 0; depth < 16; ++depth) {
    const OpId def = f.values[v].def;
    if (def == kNone) return std::nullopt;
    const Op& op = f.ops[def];
    if (op.kind == OpKind::Quantize) return AttrReader(module, f, op).integer("block");
    // Result r of a grouped collective is its operand r moved.
    std::span<const ValueId> operands = f.operands(op);
    const size_t r = operands.size() == op.result_count ? v - op.first_result : 0;
    if (r >= operands.size() || !is_fp8(module.value_type(f, operands[r]).dtype)) return std::nullopt;
    v = operands[r];
  }
  return std::nullopt;
}

int64_t fp8_scale_bytes(const Module& module, const Function& f, ValueId v) {
  const TensorType& t = module.value_type(f, v);
  if (!is_fp8(t.dtype)) return 0;
  std::optional<int64_t> block = fp8_scale_block(module, f, v);
  if (!block) return 0;
  constexpr int64_t kScaleBytes = 4;
  const int64_t row = t.rank > 0 ? t.dim(t.rank - 1) : 1;
  if (*block == 0 || row == 0) return kScaleBytes;
  const int64_t per_scale = *block == kRowwiseBlock ? row : *block;
  return kScaleBytes * ((t.numel() + per_scale - 1) / per_scale);
}

}  // namespace dstc::ir
