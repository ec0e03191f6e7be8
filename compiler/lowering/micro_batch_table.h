// Values of one lowering indexed densely by (index, micro-batch): the
// lowering looks one up for every input of every op of every micro-batch,
// so a flat array replaces ordered maps whose lookups missed the cache.
// Internal to compiler/lowering.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/ids.h"

namespace dstc::compiler {

class MicroBatchTable {
 public:
  // `count` indices (ops, tensors or op inputs) times `micro_batches`, all kNone.
  void reset(size_t count, int32_t micro_batches) {
    count_ = count;
    values_.assign(count * static_cast<size_t>(micro_batches), ir::kNone);
  }
  // Micro-batch-major, so one micro-batch's values sit together.
  ir::ValueId& at(int32_t index, int32_t micro_batch) {
    return values_[static_cast<size_t>(micro_batch) * count_ + static_cast<size_t>(index)];
  }
  ir::ValueId get(int32_t index, int32_t micro_batch) const {
    return values_[static_cast<size_t>(micro_batch) * count_ + static_cast<size_t>(index)];
  }

 private:
  size_t count_ = 0;
  std::vector<ir::ValueId> values_;
};

}  // namespace dstc::compiler
