#include "compiler/search/parallelism.h"

namespace dstc::search {

uint8_t parallelism_of(const frontend::Strategy& strategy) {
  uint8_t bits = 0;
  for (size_t axis = 0; axis < strategy.mesh.size(); ++axis) {
    if (strategy.mesh[axis].size <= 1) continue;
    if (strategy.pipeline.present && strategy.pipeline.axis == axis) {
      bits |= kPipeline;
      continue;
    }
    bool splits_model = false;
    for (const frontend::ComputeConfig& c : strategy.compute) {
      if (axis >= c.sbp.size()) continue;
      const frontend::Sbp& sbp = c.sbp[axis];
      if (sbp.kind == ir::Sbp::Split && sbp.dim != strategy.model->batch_dim) splits_model = true;
    }
    bits |= splits_model ? kTensor : kData;
  }
  return bits;
}

}  // namespace dstc::search
