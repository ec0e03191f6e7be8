// Runs a calibration plan on a device and turns the measurements into a
// profile database (htae/profile_database.h): one entry per measurement,
// plus the rate curves fitted to them, which the op estimator then uses for
// every op instead of the cluster file's assumed efficiencies.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backends/calibration/calibration_plan.h"
#include "htae/profile_database.h"

namespace dstc::calibration {

struct Calibration {
  htae::ProfileDatabase profile;
  std::vector<std::string> skipped;  // what was not measured, and why
};

// Called before each measurement: how many are done, of how many, and what
// comes next.
using Progress = std::function<void(size_t done, size_t total, const std::string& next)>;

// Throws DeviceError when the device fails.
Calibration calibrate(CalibrationDevice& device, const CalibrationPlan& plan, const Progress& progress);

// Bytes a matmul reads and writes: A and B in `dtype`, D in `dtype` (bf16
// for fp8 inputs, as FP8 training writes its GEMM outputs).
double matmul_bytes(htae::ComputeDtype dtype, MatmulShape shape);

// A table of what was measured: per dtype the best rate and the fitted
// curve, the streaming bandwidth and the launch gap; with a data sheet's
// GPU, each also as a share of its peak.
std::string describe(const Calibration& calibration, const htae::GpuSpec* datasheet);

}  // namespace dstc::calibration
