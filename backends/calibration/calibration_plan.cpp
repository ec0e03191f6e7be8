#include "backends/calibration/calibration_plan.h"

namespace dstc::calibration {

CalibrationPlan calibration_plan(bool quick) {
  CalibrationPlan plan;
  plan.dtypes.assign(htae::kComputeDtypes.begin(), htae::kComputeDtypes.end());
  // Every combination of the dims, so that the profile can interpolate any
  // shape between its eight measured neighbours (htae/profile_database.h):
  // from attention's head dims to the largest linear layers.
  std::vector<int64_t> dims =
      quick ? std::vector<int64_t>{256, 4096} : std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  for (int64_t m : dims) {
    for (int64_t n : dims) {
      for (int64_t k : dims) plan.matmuls.push_back({m, n, k});
    }
  }
  if (quick) {
    plan.add_elements = {1 << 16, 1 << 22, 1 << 26};
  } else {
    for (int64_t n = int64_t{1} << 14; n <= int64_t{1} << 28; n *= 4) plan.add_elements.push_back(n);
  }
  return plan;
}

}  // namespace dstc::calibration
