// The scales an FP8 value carries beside its elements: one fp32 number per
// tensor, per row or per block, as the `quantize` that made it chose.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/module.h"

namespace dstc::ir {

// The block of the quantize an fp8 value's numbers come from, following the
// ops that move or cut it (collectives, grouped ones too, shards); nullopt
// where none did (an fp8 argument, a received value: its send counts the
// scales, the receiver's copy does not).
std::optional<int64_t> fp8_scale_block(const Module& module, const Function& f, ValueId v);

// The bytes of those scales (fp32): 0 for a value that is not fp8 or has
// no quantize behind it.
int64_t fp8_scale_bytes(const Module& module, const Function& f, ValueId v);

}  // namespace dstc::ir
