// The GPU work `dstc calibrate` times, behind an interface: the plan, the
// fits and the profile it writes are the same code on every machine, tests
// drive them with a modelled device, and only the CUDA device
// (backends/cuda/) needs a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "htae/cluster_spec.h"

namespace dstc::calibration {

struct MatmulShape {
  int64_t m = 0;  // D (m x n) = A (m x k) B (k x n)
  int64_t n = 0;
  int64_t k = 0;
};

// A failure of the device or its libraries while measuring.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CalibrationDevice {
 public:
  virtual ~CalibrationDevice() = default;
  virtual std::string name() const = 0;
  virtual int64_t memory_bytes() const = 0;
  virtual bool supports(htae::ComputeDtype dtype) const = 0;
  // Median seconds of one matmul in `dtype` (fp32 accumulation; fp8 inputs
  // write bf16), on random data; nullopt when the library has no kernel for
  // the shape.
  virtual std::optional<double> matmul_seconds(htae::ComputeDtype dtype, MatmulShape shape) = 0;
  // Median seconds of c = a + b over `elements` fp32 values.
  virtual double add_seconds(int64_t elements) = 0;
  // Seconds per kernel when empty kernels are launched back to back.
  virtual double launch_seconds() = 0;
};

struct LocalGpu {
  std::unique_ptr<CalibrationDevice> device;  // null when there is none to use
  std::string why_not;                        // then why: no device, a driver too old for the runtime, ...
  bool built_without_gpu = false;             // this dstc has no GPU device at all
};
LocalGpu open_local_gpu();

}  // namespace dstc::calibration
