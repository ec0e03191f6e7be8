// What `dstc calibrate` measures: matmuls over a grid of shapes per dtype
// (every m, n, k from attention's head dims to the largest linear layers),
// streaming adds over sizes, and the launch gap.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/calibration/calibration_device.h"

namespace dstc::calibration {

struct CalibrationPlan {
  std::vector<htae::ComputeDtype> dtypes;
  std::vector<MatmulShape> matmuls;   // each measured in every dtype
  std::vector<int64_t> add_elements;  // fp32 elements per operand
};

// The full grid (9 x 9 x 9 shapes per dtype; 42 s on an H100 and on an H200,
// bench/results/calibration_h{100,200}_2026-11-26/),
// or a quick one (2 x 2 x 2, a few seconds) that still covers every shape.
CalibrationPlan calibration_plan(bool quick);

}  // namespace dstc::calibration
